-- Rails: rename_table :posts, :articles (Rails renames the sequence and
-- the primary key index with it).
ALTER TABLE "posts" RENAME TO "articles";
ALTER TABLE "public"."posts_id_seq" RENAME TO "articles_id_seq";
ALTER INDEX "posts_pkey" RENAME TO "articles_pkey";
ALTER INDEX "index_posts_on_user_id" RENAME TO "index_articles_on_user_id";
INSERT INTO articles (user_id, title, content, created_at, updated_at) VALUES (2, 'After the rename', 'y', '2024-09-01', '2024-09-01');
