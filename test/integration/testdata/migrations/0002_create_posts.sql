-- Rails: create_table :posts with t.references :user, foreign_key: true.
CREATE TABLE "posts" ("id" bigserial primary key, "user_id" bigint NOT NULL, "title" character varying NOT NULL, "body" text, "legacy_slug" character varying, "created_at" timestamp(6) NOT NULL, "updated_at" timestamp(6) NOT NULL, CONSTRAINT "fk_rails_5b5ddfd518" FOREIGN KEY ("user_id") REFERENCES "users" ("id"));
CREATE INDEX "index_posts_on_user_id" ON "posts" ("user_id");
