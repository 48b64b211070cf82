package kubecp

import (
	"bytes"
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

// stopGrace is how long a component may take to exit after SIGTERM before it is killed.
const stopGrace = 5 * time.Second

// logTailLines is how many lines of a component's log a failure reports.
const logTailLines = 20

// process is one running component of the kube binary, its output going to a log file.
type process struct {
	name string // apiserver, controller-manager or scheduler
	log  string // path of its log file
	cmd  *exec.Cmd
	done chan struct{} // closed once it exited and was reaped
	err  error         // its exit status, set before done is closed
}

// startProcess runs `bin <component> args…` with its stdout and stderr appended to logPath, or,
// when bin is an upstream release's kube-apiserver, the kube-<component> binary beside it.
// The component is killed when this process dies (see procAttr).
func startProcess(bin, component, logPath string, args []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the %s log: %w", component, err)
	}

	cmd := exec.Command(bin, append([]string{component}, args...)...)
	if Upstream(bin) {
		cmd = exec.Command(filepath.Join(filepath.Dir(bin), "kube-"+component), args...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting kube %s: %w", component, err)
	}

	p := &process{name: component, log: logPath, cmd: cmd, done: make(chan struct{})}

	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()

	return p, nil
}

// running reports whether the process has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// exitError describes how the process ended, with the end of its log.
func (p *process) exitError() error {
	status := "exited"
	if p.err != nil {
		status = p.err.Error()
	}

	return fmt.Errorf("kube %s %s; last lines of %s:\n%s", p.name, status, p.log, tail(p.log, logTailLines))
}

// stop asks the process to exit (SIGTERM), kills it after stopGrace and waits until it is gone.
func (p *process) stop() {
	if !p.running() {
		return
	}

	_ = p.cmd.Process.Signal(syscall.SIGTERM)

	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill ends the process at once and waits until it is gone.
func (p *process) kill() {
	if !p.running() {
		return
	}

	_ = p.cmd.Process.Kill()
	<-p.done
}

// tail is the last n lines of the file at path (read from its last 64 KiB).
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer func() { _ = f.Close() }()

	const window = 64 << 10
	if info, err := f.Stat(); err == nil && info.Size() > window {
		if _, err := f.Seek(-window, io.SeekEnd); err != nil {
			return fmt.Sprintf("(log unreadable: %v)", err)
		}
	}

	data, err := io.ReadAll(f)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}

	lines := strings.Split(string(bytes.TrimRight(data, "\n")), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}

	return strings.Join(lines, "\n")
}
