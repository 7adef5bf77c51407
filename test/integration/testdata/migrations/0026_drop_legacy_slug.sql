-- Django: RemoveField(legacy_slug).
ALTER TABLE "posts" DROP COLUMN "legacy_slug" CASCADE;
