-- Django: AlterField(tier, null=False, default=0).
ALTER TABLE "accounts" ALTER COLUMN "tier" SET DEFAULT 0;
ALTER TABLE "accounts" ALTER COLUMN "tier" SET NOT NULL;
