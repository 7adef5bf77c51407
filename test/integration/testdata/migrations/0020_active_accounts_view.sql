-- Django: RunSQL creating a reporting view.
CREATE VIEW "active_accounts" AS SELECT "id", "balance", "tier" FROM "accounts" WHERE "status" = 'active';
