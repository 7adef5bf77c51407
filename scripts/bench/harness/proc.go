package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat: 100
// on every Linux architecture Go builds for.
const clockTicks = 100

// procStat is what the harness reads from /proc/<pid>/stat.
type procStat struct {
	ppid            int
	ticks, children int64 // utime+stime, and cutime+cstime of reaped children
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name is in parentheses and may hold spaces: the fields
	// counted here start after its closing one.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
	// f[0] is the state (field 3): ppid is field 4, utime..cstime 14..17.
	return procStat{ppid: int(n(1)), ticks: n(11) + n(12), children: n(13) + n(14)}, nil
}

// processes reads every process's stat, by pid.
func processes() map[int]procStat {
	all := make(map[int]procStat)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil {
			all[pid] = st
		}
	}
	return all
}

// descendants are root and every process below it in all.
func descendants(all map[int]procStat, root int) []int {
	kids := make(map[int][]int)
	for pid, st := range all {
		kids[st.ppid] = append(kids[st.ppid], pid)
	}
	var out []int
	var walk func(int)
	walk = func(pid int) {
		if _, ok := all[pid]; !ok {
			return
		}
		out = append(out, pid)
		for _, k := range kids[pid] {
			walk(k)
		}
	}
	walk(root)
	return out
}

// rssAnon is a process's anonymous resident memory, in bytes: what it
// holds itself, without the shared buffers a PostgreSQL process maps or
// the pages of its program file, so that a tool inside the server and one
// outside it are measured alike.
func rssAnon(pid int) int64 { return statusKB(pid, "RssAnon:") * 1024 }

// statusKB is a field of /proc/<pid>/status given in kB, such as
// "VmRSS:"; 0 once the process has gone.
func statusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb
			}
		}
	}
	return 0
}

// clusterCPU is the CPU time, in seconds, every process of the cluster in
// dataDir has used: the postmaster's, its reaped children's (which the
// kernel adds to its cutime and cstime) and its live children's, from all
// (processes). It only grows, so two readings bracket the time spent
// between them.
func clusterCPU(dataDir string, all map[int]procStat) (float64, error) {
	pm, err := postmasterPID(dataDir)
	if err != nil {
		return 0, err
	}
	st, ok := all[pm]
	if !ok {
		return 0, fmt.Errorf("postmaster %d of %s is not running", pm, dataDir)
	}
	total := st.ticks + st.children
	for pid, c := range all {
		if c.ppid == pm && pid != pm {
			total += c.ticks + c.children
		}
	}
	return float64(total) / clockTicks, nil
}

// postmasterPID is the pid of the cluster's postmaster, from its
// postmaster.pid.
func postmasterPID(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("%s/postmaster.pid: %w", dataDir, err)
	}
	return pm, nil
}

// process is a program the harness started and will end: its output goes
// to a log file.
type process struct {
	name  string
	what  string // its command line, for the harness's waiting lines
	cmd   *exec.Cmd
	done  chan struct{}
	ended atomic.Bool // set before done is closed
	err   error       // once ended
}

// start starts name with args, in dir, with env added, its stdout in
// outPath and its stderr in errPath (the same file when they are equal).
// It runs until it exits or stop ends it.
func start(dir, outPath, errPath string, env []string, name string, args ...string) (*process, error) {
	out, err := os.Create(outPath)
	if err != nil {
		return nil, err
	}
	errOut := out
	if errPath != outPath {
		if errOut, err = os.Create(errPath); err != nil {
			out.Close()
			return nil, err
		}
	}
	closeLogs := func() {
		out.Close()
		if errOut != out {
			errOut.Close()
		}
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = out
	cmd.Stderr = errOut
	// A group of its own: stop signals its children too (pgcopydb's).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		closeLogs()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: filepath.Base(name), what: strings.Join(append([]string{filepath.Base(name)}, args...), " "), cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		closeLogs()
		p.ended.Store(true)
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// peakRSSMB is the kernel's peak resident set size of the ended process
// (its rusage's maxrss, in MB of 2^20 bytes), as /usr/bin/time -v's
// "Maximum resident set size" gave it: no short spike is missed.
func (p *process) peakRSSMB() (float64, error) {
	if !p.exited() {
		return 0, fmt.Errorf("%s is still running: no peak RSS yet", p.name)
	}
	ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok || ru.Maxrss <= 0 {
		return 0, fmt.Errorf("%s: no peak RSS in its rusage", p.what)
	}
	return float64(ru.Maxrss) / 1024, nil
}

// exited reports whether the process has ended (its err is then set).
func (p *process) exited() bool { return p.ended.Load() }

// wait waits at most limit for the process to end on its own, and returns
// its error; one still running then is an error.
func (p *process) wait(ctx context.Context, limit time.Duration) error {
	defer waiting(p.what, limit)()
	select {
	case <-p.done:
		return p.err
	case <-time.After(limit):
		return fmt.Errorf("%s still running after %s", p.name, limit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop sends SIGTERM to the process's group, and SIGKILL after grace; it
// returns once the process has ended.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
	}
}
