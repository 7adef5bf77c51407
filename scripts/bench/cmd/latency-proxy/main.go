// Command latency-proxy puts a network between the benchmark scripts and
// the source server: a TCP proxy on 127.0.0.1 that holds every chunk it
// reads for half a round trip before writing it on, each way, without
// limiting bandwidth (issue 18, "A source far away").
//
//	latency-proxy -listen 127.0.0.1:26662 -target 127.0.0.1:26562 -rtt 10ms
//
// Each direction of a connection has a reader that stamps each chunk with
// its arrival time and queues it, and a writer that sleeps until arrival
// plus half the round trip and writes it: the delay is a latency, not a
// rate, so a stream of chunks keeps its throughput and only arrives later.
// Order is kept, a half-close (FIN) is passed on after the data before it,
// and an error on either side closes both. The TCP handshake itself is not
// delayed: a new connection costs no round trip, its first bytes do.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// chunkSize is the reader's buffer: what one read can take from the kernel.
const chunkSize = 64 << 10

// queueChunks is how many chunks a direction holds in flight. The writer
// holds them for half a round trip; at 64 KiB a chunk, 4096 of them are
// 256 MiB, far more than any link the benchmarks model carries in 5 ms, so
// the queue never becomes the bandwidth limit.
const queueChunks = 4096

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "latency-proxy:", err)
		stop()
		os.Exit(1)
	}
}

// options are the parsed flags.
type options struct {
	listen string
	target string
	rtt    time.Duration
}

// parseFlags reads the flags and refuses a listen address other than
// 127.0.0.1: the proxy has no authentication of its own and must not open
// the source to the network.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("latency-proxy", flag.ContinueOnError)
	fs.StringVar(&o.listen, "listen", "", "address to listen on, 127.0.0.1:PORT")
	fs.StringVar(&o.target, "target", "", "address to forward to, HOST:PORT")
	fs.DurationVar(&o.rtt, "rtt", 0, "round trip to add: each direction is delayed by half of it")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		return o, fmt.Errorf("-listen %q: %w", o.listen, err)
	}
	if host != "127.0.0.1" {
		return o, fmt.Errorf("-listen %q: only 127.0.0.1 is allowed", o.listen)
	}
	if _, _, err := net.SplitHostPort(o.target); err != nil {
		return o, fmt.Errorf("-target %q: %w", o.target, err)
	}
	if o.rtt < 0 {
		return o, fmt.Errorf("-rtt %s: must not be negative", o.rtt)
	}
	return o, nil
}

// run parses the flags, listens and proxies until ctx is cancelled.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.listen, err)
	}
	fmt.Fprintf(stdout, "latency-proxy: %s -> %s, round trip %s\n", ln.Addr(), o.target, o.rtt)
	return serve(ctx, ln, o.target, o.rtt)
}

// serve accepts connections on ln and proxies each to target with half of
// rtt added each way. When ctx is cancelled it closes ln and every open
// connection, waits for their goroutines and returns nil.
func serve(ctx context.Context, ln net.Listener, target string, rtt time.Duration) error {
	stopAccept := context.AfterFunc(ctx, func() { ln.Close() })
	defer stopAccept()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := proxy(ctx, c.(*net.TCPConn), target, rtt/2); err != nil {
				fmt.Fprintf(os.Stderr, "latency-proxy: %s: %v\n", c.RemoteAddr(), err)
			}
		}()
	}
}

// proxy connects client to target and forwards both ways with delay added
// to each chunk, until both directions have ended or one has failed.
func proxy(ctx context.Context, client *net.TCPConn, target string, delay time.Duration) error {
	var d net.Dialer
	sc, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		client.Close()
		return fmt.Errorf("dial %s: %w", target, err)
	}
	server := sc.(*net.TCPConn)
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			client.Close()
			server.Close()
		})
	}
	stopClose := context.AfterFunc(ctx, closeBoth)
	defer stopClose()
	defer closeBoth()

	errs := make(chan error, 2)
	go func() { errs <- forward(server, client, delay, closeBoth) }()
	go func() { errs <- forward(client, server, delay, closeBoth) }()
	var first error
	for range 2 {
		if err := <-errs; err != nil && first == nil && ctx.Err() == nil {
			first = err
		}
	}
	return first
}

// chunk is what one read returned, with when it arrived.
type chunk struct {
	data    []byte
	arrived time.Time
}

// forward copies src to dst, each chunk written delay after it was read.
// At src's EOF it half-closes dst once the queued chunks are written; on
// an error on either side it calls closeBoth, which ends the other
// direction too.
func forward(dst, src *net.TCPConn, delay time.Duration, closeBoth func()) error {
	queue := make(chan chunk, queueChunks)
	// The reader's end: a nil error is EOF, at its time of arrival (the FIN
	// is delayed like the data).
	type end struct {
		err error
		at  time.Time
	}
	readEnd := make(chan end, 1)
	go func() {
		defer close(queue)
		buf := make([]byte, chunkSize)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				// Stamped before the copy: the delay counts from the read.
				c := chunk{arrived: time.Now(), data: make([]byte, n)}
				copy(c.data, buf[:n])
				queue <- c
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				readEnd <- end{err: err, at: time.Now()}
				return
			}
		}
	}()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	sleepUntil := func(t time.Time) {
		if wait := time.Until(t); wait > 0 {
			timer.Reset(wait)
			<-timer.C
		}
	}
	var writeErr error
	for c := range queue {
		if writeErr != nil {
			continue // drain, so the reader is not left blocked on a full queue
		}
		sleepUntil(c.arrived.Add(delay))
		if _, err := dst.Write(c.data); err != nil {
			writeErr = fmt.Errorf("write to %s: %w", dst.RemoteAddr(), err)
			closeBoth() // also unblocks the reader
		}
	}
	if writeErr != nil {
		return writeErr
	}
	e := <-readEnd
	if e.err != nil {
		closeBoth()
		return fmt.Errorf("read from %s: %w", src.RemoteAddr(), e.err)
	}
	// A clean EOF: pass the FIN on after the data before it, as late as the
	// network would. The peer may already have gone; that is the other
	// direction's error to report.
	sleepUntil(e.at.Add(delay))
	dst.CloseWrite()
	return nil
}
