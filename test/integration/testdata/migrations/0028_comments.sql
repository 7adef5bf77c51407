-- Django: db_table_comment and db_comment.
COMMENT ON TABLE "accounts" IS 'Customer accounts';
COMMENT ON COLUMN "accounts"."tier" IS 'Pricing tier: 0, 1 or 2';
