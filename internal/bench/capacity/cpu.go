package capacity

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times; it is
// 100 on every Linux Go supports.
const clockTicks = 100

// cpuSample is the CPU time used so far by the server's process tree, the
// database's, this process and the whole machine, in ticks.
type cpuSample struct {
	at                              time.Time
	server, database, self, machine uint64
}

// sampler reads CPU times from /proc (Linux). Pids of 0 are not sampled:
// a server on another machine, or in this process (then its CPU is the
// bench's).
type sampler struct {
	serverPid, databasePid int
}

// sample reads the times now; on a system without /proc every figure is 0.
func (s sampler) sample() cpuSample {
	parents := parentsOf()
	return cpuSample{at: time.Now(), server: treeTicks(s.serverPid, parents, s.databasePid), database: treeTicks(s.databasePid, parents, 0),
		self: procTicks(os.Getpid()), machine: machineTicks()}
}

// between is the CPU used from a to b in cores.
func between(a, b cpuSample) CPU {
	wall := b.at.Sub(a.at).Seconds()
	cores := func(x, y uint64) float64 {
		if wall <= 0 || y < x {
			return 0
		}
		return float64(y-x) / clockTicks / wall
	}
	return CPU{Server: cores(a.server, b.server), Database: cores(a.database, b.database), Bench: cores(a.self, b.self),
		Machine: cores(a.machine, b.machine), Cores: runtime.NumCPU(), Load1: load1()}
}

// parentsOf maps every process id to its parent's.
func parentsOf() map[int]int {
	out := map[int]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if f := statFields(pid); len(f) > 2 {
			ppid, _ := strconv.Atoi(f[1])
			out[pid] = ppid
		}
	}
	return out
}

// treeTicks is the CPU time of root and its descendants, leaving out the
// tree of skip (the database a development server started is its child
// when started without pg_ctl's daemonizing).
func treeTicks(root int, parents map[int]int, skip int) uint64 {
	if root == 0 {
		return 0
	}
	var sum uint64
	for pid := range parents {
		for p := pid; p > 1; p = parents[p] {
			if p == skip {
				break
			}
			if p == root {
				sum += procTicks(pid)
				break
			}
		}
	}
	return sum
}

// statFields are the fields of /proc/pid/stat after the command name
// (field 3 of proc(5) is the first).
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// procTicks is utime+stime of pid (fields 14 and 15 of proc(5)).
func procTicks(pid int) uint64 {
	f := statFields(pid)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return u + s
}

// machineTicks is the busy time of all cores: /proc/stat's cpu line
// without idle and iowait.
func machineTicks() uint64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var sum uint64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest times are in user already
			continue
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		sum += n
	}
	return sum
}

// load1 is the one-minute load average.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
