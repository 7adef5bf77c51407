-- Prisma: @db.Decimal(20, 2) on an Int field, with the USING its
-- migrate diff writes; the application updates the column meanwhile.
ALTER TABLE "accounts" ALTER COLUMN "balance" SET DATA TYPE DECIMAL(20,2) USING "balance"::DECIMAL(20,2);
