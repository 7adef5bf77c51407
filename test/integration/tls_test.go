//go:build integration

package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestScramPasswordsAndTLS: the source asks a role for a scram-sha-256
// password over TLS only (pg_hba: hostssl ... scram-sha-256, and host ...
// reject), with a certificate from a throw-away CA that pgsync checks with
// sslmode=verify-full. The password comes from the url, from PGPASSWORD
// and from a .pgpass file; check passes each way, a whole job runs, and the
// password appears in no output, log line or status --json. A wrong CA is
// refused in one line.
func TestScramPasswordsAndTLS(t *testing.T) {
	// The source's role exists on the source only: the built-in creator
	// (pg_dump's schema would name it, and be refused).
	e := newEnv(t, "CREATE TABLE s (id int PRIMARY KEY, v text); INSERT INTO s SELECT g, 'v' FROM generate_series(1, 100) g;", builtinCreator)
	role := "scram_" + e.db
	password := "Pw-" + e.db + "-s3cr3t"
	dir := t.TempDir()
	caPath, wrongCAPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "other-ca.pem")
	serverCert, serverKey := writeCerts(t, caPath, wrongCAPath)

	data := filepath.Join(pgDir, "source")
	hbaPath := filepath.Join(data, "pg_hba.conf")
	hba, err := os.ReadFile(hbaPath)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"pgsync-test-server.crt": serverCert, "pgsync-test-server.key": serverKey} {
		writeOwnedByCluster(t, filepath.Join(data, name), body)
	}
	rules := fmt.Sprintf("hostssl all %s 127.0.0.1/32 scram-sha-256\nhost all %s 127.0.0.1/32 reject\n", role, role)
	writeOwnedByCluster(t, hbaPath, append([]byte(rules), hba...))
	admin := mustConnect(t, adminURL(sourcePort))
	defer admin.Close(context.Background())
	t.Cleanup(func() {
		writeOwnedByCluster(t, hbaPath, hba)
		a, err := mustConnectErr(adminURL(sourcePort))
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer a.Close(context.Background())
		for _, q := range []string{"ALTER SYSTEM RESET ssl", "ALTER SYSTEM RESET ssl_cert_file", "ALTER SYSTEM RESET ssl_key_file", "SELECT pg_reload_conf()"} {
			if _, err := a.Exec(context.Background(), q); err != nil {
				t.Errorf("cleanup %s: %v", q, err)
			}
		}
		_, _ = a.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		if c, err := mustConnectErr(e.srcURL); err == nil {
			_, _ = c.Exec(context.Background(), "DROP OWNED BY "+role)
			c.Close(context.Background())
		}
		_, _ = a.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
	})
	for _, q := range []string{
		"DROP ROLE IF EXISTS " + role,
		fmt.Sprintf("CREATE ROLE %s LOGIN REPLICATION PASSWORD '%s'", role, password),
		"ALTER SYSTEM SET ssl_cert_file = 'pgsync-test-server.crt'",
		"ALTER SYSTEM SET ssl_key_file = 'pgsync-test-server.key'",
		"ALTER SYSTEM SET ssl = on",
		"SELECT pg_reload_conf()",
	} {
		if _, err := admin.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	e.srcExec("ALTER TABLE s OWNER TO " + role + "; GRANT CREATE ON DATABASE " + e.db + " TO " + role)
	// The reload is asynchronous: wait until the server takes TLS.
	eventually(t, 10*time.Second, "the source to accept TLS", func() bool {
		c, err := mustConnectErr(fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=require", sourcePort))
		if err != nil {
			return false
		}
		c.Close(context.Background())
		return true
	})

	tls := fmt.Sprintf("127.0.0.1:%s/%s?sslmode=verify-full&sslrootcert=%s", sourcePort, e.db, caPath)
	cfg, _ := os.ReadFile(e.cfgPath)
	withSource := func(url string) string {
		path := filepath.Join(t.TempDir(), "pgsync.toml")
		body := strings.Replace(string(cfg), e.srcURL, url, 1)
		if body == string(cfg) {
			t.Fatalf("source url not found in the configuration:\n%s", cfg)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	noPassword := func(what string, r result) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, password) {
			t.Errorf("%s printed the password:\n%s\n%s", what, r.stdout, r.stderr)
		}
	}
	inURL := withSource(fmt.Sprintf("postgres://%s:%s@%s", role, password, tls))
	noneInURL := withSource(fmt.Sprintf("postgres://%s@%s", role, tls))

	t.Run("password in the url", func(t *testing.T) {
		r := runPgsync(t, time.Minute, "-c", inURL, "check")
		noPassword("check", r)
		if r.code != 0 || !strings.Contains(r.stdout, "OK    source") {
			t.Errorf("check: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("password in PGPASSWORD", func(t *testing.T) {
		t.Setenv("PGPASSWORD", password)
		r := runPgsync(t, time.Minute, "-c", noneInURL, "check")
		noPassword("check", r)
		if r.code != 0 {
			t.Errorf("check: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("password in a pgpass file", func(t *testing.T) {
		pgpass := filepath.Join(t.TempDir(), "pgpass")
		line := fmt.Sprintf("127.0.0.1:%s:%s:%s:%s\n", sourcePort, e.db, role, password)
		if err := os.WriteFile(pgpass, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PGPASSFILE", pgpass)
		r := runPgsync(t, time.Minute, "-c", noneInURL, "check")
		noPassword("check", r)
		if r.code != 0 {
			t.Errorf("check: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("no password", func(t *testing.T) {
		r := runPgsync(t, time.Minute, "-c", noneInURL, "status")
		if r.code != 1 || len(strings.Split(strings.TrimSpace(r.stderr), "\n")) != 1 {
			t.Errorf("status without a password: exit %d\n%s", r.code, r.stderr)
		}
	})
	t.Run("a certificate from another CA", func(t *testing.T) {
		wrong := withSource(fmt.Sprintf("postgres://%s:%s@127.0.0.1:%s/%s?sslmode=verify-full&sslrootcert=%s", role, password, sourcePort, e.db, wrongCAPath))
		r := runPgsync(t, time.Minute, "-c", wrong, "status")
		noPassword("status", r)
		if r.code != 1 || len(strings.Split(strings.TrimSpace(r.stderr), "\n")) != 1 || !strings.Contains(r.stderr, "certificate") {
			t.Errorf("status with the wrong CA: exit %d\n%s", r.code, r.stderr)
		}
	})

	// A whole job over TLS with the scram role.
	for _, args := range [][]string{{"bootstrap"}} {
		r := runPgsync(t, 2*time.Minute, append([]string{"-c", inURL}, args...)...)
		noPassword("bootstrap", r)
		if r.code != 0 {
			t.Fatalf("bootstrap over TLS: exit %d\n%s", r.code, r.stderr)
		}
	}
	e.srcExec("INSERT INTO s VALUES (1000, 'new'); UPDATE s SET v = 'changed' WHERE id < 10")
	for _, args := range [][]string{{"run", "--until-caught-up"}, {"verify"}, {"status", "--json"}, {"sequences"}, {"teardown"}} {
		r := runPgsync(t, 2*time.Minute, append([]string{"-c", inURL}, args...)...)
		noPassword(args[0], r)
		if r.code != 0 {
			t.Errorf("%v over TLS: exit %d\n%s\n%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if got := queryOne[string](t, e.tgt, "SELECT v FROM s WHERE id = 1000"); got != "new" {
		t.Errorf("row 1000 on the target: %q", got)
	}
}

// writeCerts makes a CA and a server certificate for 127.0.0.1 signed by
// it, writes the CA (and an unrelated CA) as PEM, and returns the server's
// certificate and key.
func writeCerts(t *testing.T, caPath, otherCAPath string) (certPEM, keyPEM []byte) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	pemOf := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	makeCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		k := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c, k, pemOf("CERTIFICATE", der)
	}
	ca, caKey, caPEM := makeCA("pgsync test CA")
	_, _, otherPEM := makeCA("another CA")
	if err := os.WriteFile(caPath, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(otherCAPath, otherPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	k := newKey()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano() + 1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pemOf("CERTIFICATE", der), pemOf("PRIVATE KEY", keyDER)
}

// writeOwnedByCluster writes a file the server reads: mode 0600, owned by
// the user the clusters run as (postgres when the tests run as root).
func writeOwnedByCluster(t *testing.T, path string, body []byte) {
	t.Helper()
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 {
		return
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}
