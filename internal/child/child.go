// Package child runs a program, as a rule a settle binary, as a child
// process: started with its output in a log file, signalled, stopped
// (SIGTERM, then SIGKILL after a bound), killed, waited for with a bound,
// and its log's end read back. It is the one way settle's tools and tests
// run the binary beside them (the bench's edge runs, internal/proctest for
// the multi-process tests); it never decides what the child is asked to do.
package child

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// outputWaitMax bounds how long an exited child's stdout is read on.
const outputWaitMax = 5 * time.Second

// Options say what to start.
type Options struct {
	// Name names the child in messages.
	Name string
	// Bin is the program.
	Bin  string
	Args []string
	// Env is the child's whole environment; nil = this process's.
	Env []string
	// Dir is the working directory; "" = this process's.
	Dir string
	// LogPath is the file that gets the child's stdout and stderr.
	LogPath string
	// Stdout, when set, gets the child's stdout too.
	Stdout io.Writer
	// Stdin, when set, is the child's stdin (an *os.File is handed over
	// as it is); nil = the null device.
	Stdin io.Reader
	// Group makes the child lead a process group of its own, for a child
	// that starts the program under test (`go run`): signals go to the
	// child's children, and Kill kills the whole group. (A terminal's
	// Ctrl-C reaches both, and the go command then exits 1 of its own
	// accord whatever the program did; signalled alone, the program's exit
	// code is go run's.)
	Group bool
}

// Process is one running child.
type Process struct {
	// Name is Options.Name.
	Name string

	cmd     *exec.Cmd
	group   bool
	logPath string // combined stdout and stderr

	done chan struct{}
	err  error // from Wait, set before done closes
}

// Start starts the child described by o.
func Start(o Options) (*Process, error) {
	p := &Process{Name: o.Name, group: o.Group, done: make(chan struct{}), logPath: o.LogPath}
	f, err := os.Create(p.logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", o.Name, err)
	}
	p.cmd = exec.Command(o.Bin, o.Args...)
	p.cmd.Dir = o.Dir
	p.cmd.Env = o.Env
	p.cmd.Stdin = o.Stdin
	if o.Group {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	p.cmd.Stderr = f
	p.cmd.Stdout = f
	if o.Stdout != nil {
		p.cmd.Stdout = io.MultiWriter(o.Stdout, f)
	}
	// A grandchild that inherited stdout must not hold Wait (and so Done)
	// open after the child itself exited.
	p.cmd.WaitDelay = outputWaitMax
	if err := p.cmd.Start(); err != nil {
		_ = f.Close() // nothing was written: the start failed
		return nil, fmt.Errorf("start %s: %w", o.Name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		if err := f.Close(); err != nil && p.err == nil {
			p.err = fmt.Errorf("close the log of %s: %w", o.Name, err)
		}
		close(p.done)
	}()
	return p, nil
}

// Pid is the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the child has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Signal sends sig to the child or, with Options.Group, to the child's
// children (the program go run started).
func (p *Process) Signal(sig syscall.Signal) error {
	if !p.group {
		if err := p.cmd.Process.Signal(sig); err != nil {
			return fmt.Errorf("signal %v to %s: %w", sig, p.Name, err)
		}
		return nil
	}
	// Any thread of the go command may have started the program.
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p.Pid()))
	var children []string
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		children = append(children, strings.Fields(string(b))...)
	}
	if len(children) == 0 {
		return fmt.Errorf("signal %v to the program %s started: it has no child", sig, p.Name)
	}
	var errs []error
	for _, c := range children {
		// A pid that does not parse must not become 0: kill(0, sig)
		// signals this whole process group.
		var child int
		if _, err := fmt.Sscan(c, &child); err != nil {
			errs = append(errs, fmt.Errorf("signal %v to a child of %s: pid %q: %w", sig, p.Name, c, err))
			continue
		}
		if child <= 0 {
			errs = append(errs, fmt.Errorf("signal %v to a child of %s: pid %d is no process", sig, p.Name, child))
			continue
		}
		if err := syscall.Kill(child, sig); err != nil {
			errs = append(errs, fmt.Errorf("signal %v to pid %d, child of %s: %w", sig, child, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Exited reports whether the child has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WaitExit waits up to d for the child to exit and reports whether it did.
func (p *Process) WaitExit(d time.Duration) bool {
	if p.Exited() {
		return true // also for d <= 0, where the timer would race done
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// Err is how the child exited (nil: code 0) once Done is closed; nil
// before.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// ExitCode waits up to timeout for the child to exit and returns its exit
// code: -1 when a signal killed it, -2 when it did not exit within
// timeout, -3 when waiting for it failed.
func (p *Process) ExitCode(timeout time.Duration) int {
	if !p.WaitExit(timeout) {
		return -2
	}
	if p.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	return -3
}

// Kill sends SIGKILL (after SIGCONT, in case it is stopped) to the child,
// or its whole process group with Options.Group, and waits for it.
func (p *Process) Kill() {
	if p.group {
		_ = syscall.Kill(-p.Pid(), syscall.SIGCONT)
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	} else {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// Stop asks the child to stop (SIGTERM) and waits up to d, then kills it.
// It returns the child's exit error (nil: a clean stop).
func (p *Process) Stop(d time.Duration) error {
	_ = p.Signal(syscall.SIGTERM)
	if !p.WaitExit(d) {
		p.Kill()
		return fmt.Errorf("%s did not stop within %s; killed", p.Name, d)
	}
	return p.err
}

// Tail returns the last n bytes of the log ("" when it cannot be read),
// and whether there was more before them.
func (p *Process) Tail(n int64) (string, bool) {
	f, err := os.Open(p.logPath)
	if err != nil {
		return "", false
	}
	defer func() { _ = f.Close() }() // opened only to read
	fi, err := f.Stat()
	if err != nil {
		return "", false
	}
	off := max(0, fi.Size()-n)
	b := make([]byte, fi.Size()-off)
	m, _ := f.ReadAt(b, off)
	return string(b[:m]), off > 0
}
