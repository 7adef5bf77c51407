-- Prisma: a new enum and a required field with its default.
CREATE TYPE "PostState" AS ENUM ('DRAFT', 'PUBLISHED');
ALTER TABLE "posts" ADD COLUMN "state" "PostState" NOT NULL DEFAULT 'DRAFT';
