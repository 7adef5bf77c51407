-- Prisma: a value added to the enum.
ALTER TYPE "PostState" ADD VALUE 'ARCHIVED';
