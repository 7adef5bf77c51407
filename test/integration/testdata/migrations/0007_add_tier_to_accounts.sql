-- Django: AddField(tier, null=True), first step of a NOT NULL column.
ALTER TABLE "accounts" ADD COLUMN "tier" integer NULL;
