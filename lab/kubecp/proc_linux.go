package kubecp

import "syscall"

// procAttr makes the kernel kill a component when the thread that started it dies: with Go's
// runtime that is when this process dies (threads are not torn down while it runs), so a
// crashed or killed test or lab never leaves a control plane behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
