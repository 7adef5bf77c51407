-- Rails: rename_column :posts, :body, :content.
ALTER TABLE "posts" RENAME COLUMN "body" TO "content";
UPDATE posts SET content = 'Content ' || id WHERE content IS NULL;
