package job

import "testing"

func TestPostDataTable(t *testing.T) {
	tests := []struct{ sql, want string }{
		{"ALTER TABLE ONLY public.a\n    ADD CONSTRAINT a_pkey PRIMARY KEY (id);", "public.a"},
		{`ALTER TABLE ONLY "Sales Dept"."Q1 Orders"` + "\n    ADD CONSTRAINT q PRIMARY KEY (id);", "Sales Dept.Q1 Orders"},
		{"CREATE INDEX a_v ON public.a USING btree (v);", "public.a"},
		{"CREATE UNIQUE INDEX u ON ONLY public.p USING btree (id);", "public.p"},
		{`CREATE INDEX "X" ON s."t""q" USING btree (v);`, `s.t"q`},
		{"ALTER INDEX public.p_pkey ATTACH PARTITION public.p1_pkey;", ""},
		{"CREATE TRIGGER t AFTER INSERT ON public.a FOR EACH ROW EXECUTE FUNCTION f();", ""},
	}
	for _, tt := range tests {
		if got := postDataTable(tt.sql); got != tt.want {
			t.Errorf("postDataTable(%q) = %q, want %q", tt.sql, got, tt.want)
		}
	}
}
