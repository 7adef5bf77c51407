-- Rails: add_reference without validation, then add_foreign_key
-- validate: false (a NOT VALID constraint takes no long lock).
ALTER TABLE "orders" ADD "user_id" bigint;
ALTER TABLE "orders" ADD CONSTRAINT "fk_rails_orders_user" FOREIGN KEY ("user_id") REFERENCES "users" ("id") NOT VALID;
CREATE INDEX "index_orders_on_user_id" ON "orders" ("user_id");
