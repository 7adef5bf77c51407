-- Django: AddField(status, default='active'): the default is set to fill
-- the existing rows, then dropped (the model's default is Python's).
ALTER TABLE "accounts" ADD COLUMN "status" varchar(16) DEFAULT 'active' NOT NULL;
ALTER TABLE "accounts" ALTER COLUMN "status" DROP DEFAULT;
