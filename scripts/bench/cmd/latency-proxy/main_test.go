package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// startEcho starts a server on 127.0.0.1 that writes back what it reads
// and half-closes at EOF.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	return ln.Addr().String()
}

// startProxy starts serve in front of target and returns its address; the
// proxy is stopped, and serve's return checked, at the end of the test.
func startProxy(t *testing.T, target string, rtt time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, target, rtt) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("serve did not return after cancel")
		}
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func TestRoundTripTakesRTT(t *testing.T) {
	const rtt = 20 * time.Millisecond
	c := dial(t, startProxy(t, startEcho(t), rtt))
	msg := []byte("ping")
	got := make([]byte, len(msg))
	for i := range 5 {
		start := time.Now()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if !bytes.Equal(got, msg) {
			t.Fatalf("round trip %d: got %q, want %q", i, got, msg)
		}
		if took < rtt || took >= 60*time.Millisecond {
			t.Errorf("round trip %d took %s, want at least %s and under 60ms", i, took, rtt)
		}
	}
}

func TestZeroRTTForwards(t *testing.T) {
	c := dial(t, startProxy(t, startEcho(t), 0))
	start := time.Now()
	c.Write([]byte("x"))
	got := make([]byte, 1)
	if _, err := io.ReadFull(c, got); err != nil || got[0] != 'x' {
		t.Fatalf("got %q, %v", got, err)
	}
	if took := time.Since(start); took > 20*time.Millisecond {
		t.Errorf("round trip at -rtt 0 took %s", took)
	}
}

// TestBulkIntact sends 10 MB through the proxy to the echo server and back,
// half-closes, and reads to EOF: the bytes are intact, in order, the FIN
// reaches the server and its FIN comes back, and the time is a latency's,
// not a bandwidth limit's.
func TestBulkIntact(t *testing.T) {
	const size = 10 << 20
	data := make([]byte, size)
	rand.Read(data)
	want := sha256.Sum256(data)

	c := dial(t, startProxy(t, startEcho(t), 20*time.Millisecond))
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := c.Write(data); err != nil {
			t.Error(err)
		}
		c.CloseWrite()
	}()
	h := sha256.New()
	n, err := io.Copy(h, c)
	wg.Wait()
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if n != size {
		t.Fatalf("read %d bytes back, want %d", n, size)
	}
	if !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatal("checksum differs")
	}
	if took > 2*time.Second {
		t.Errorf("10 MB took %s through the proxy", took)
	}
	t.Logf("10 MB there and back in %s", took)
}

// TestManyConnections checks that connections are independent: several at
// once each get their own bytes back.
func TestManyConnections(t *testing.T) {
	addr := startProxy(t, startEcho(t), 2*time.Millisecond)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			msg := bytes.Repeat([]byte{byte('a' + i)}, 1000)
			c.Write(msg)
			c.(*net.TCPConn).CloseWrite()
			got, err := io.ReadAll(c)
			if err != nil || !bytes.Equal(got, msg) {
				t.Errorf("connection %d: got %d bytes, %v", i, len(got), err)
			}
		}()
	}
	wg.Wait()
}

// TestCancelClosesOpen checks that stopping the proxy ends a connection
// that is still open.
func TestCancelClosesOpen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, startEcho(t), 0) }()
	c := dial(t, ln.Addr().String())
	c.Write([]byte("x"))
	io.ReadFull(c, make([]byte, 1))
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not return")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection still open after the proxy stopped")
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"-listen", "127.0.0.1:1", "-target", "127.0.0.1:2", "-rtt", "10ms"}, ""},
		{[]string{"-listen", "127.0.0.1:1", "-target", "127.0.0.1:2"}, ""},
		{[]string{"-listen", "0.0.0.0:1", "-target", "127.0.0.1:2"}, "only 127.0.0.1"},
		{[]string{"-listen", ":1", "-target", "127.0.0.1:2"}, "only 127.0.0.1"},
		{[]string{"-listen", "localhost:1", "-target", "127.0.0.1:2"}, "only 127.0.0.1"},
		{[]string{"-listen", "127.0.0.1", "-target", "127.0.0.1:2"}, "-listen"},
		{[]string{"-listen", "127.0.0.1:1"}, "-target"},
		{[]string{"-listen", "127.0.0.1:1", "-target", "127.0.0.1:2", "-rtt", "-1ms"}, "negative"},
	}
	for _, tt := range tests {
		_, err := parseFlags(tt.args)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%q: got %v, want an error with %q", tt.args, err, tt.wantErr)
		}
	}
}
