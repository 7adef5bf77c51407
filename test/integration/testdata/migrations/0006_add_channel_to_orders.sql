-- Rails: add_column :orders, :channel, :string, null: false, default: "web",
-- on a table the application inserts into all the time.
ALTER TABLE "orders" ADD "channel" character varying(10) DEFAULT 'web' NOT NULL;
