-- Rails: add_check_constraint validate: false, then validate_check_constraint.
ALTER TABLE "posts" ADD CONSTRAINT "posts_title_length" CHECK (char_length("title") <= 300) NOT VALID;
ALTER TABLE "posts" VALIDATE CONSTRAINT "posts_title_length";
