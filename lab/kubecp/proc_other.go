//go:build !linux

package kubecp

import "syscall"

// procAttr: only Linux can tie a child's life to its parent's; elsewhere the components are
// stopped by Stop or the end of Start's context only.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
