-- Rails: validate_foreign_key :orders, :users, in a later deployment.
ALTER TABLE "orders" VALIDATE CONSTRAINT "fk_rails_orders_user";
