-- Django: AlterField(name, max_length=200).
ALTER TABLE "users" ALTER COLUMN "name" TYPE varchar(200);
UPDATE users SET name = repeat('n', 150) WHERE id = 1;
