//go:build linux

package pgcluster

import "syscall"

// sysProcAttr drops to ra (when non-nil), puts the server in its own process
// group so a terminal's Ctrl-C reaches settle, which then stops the cluster
// in order, rather than the postmaster directly, and asks the kernel to
// send SIGQUIT (immediate shutdown) to the postmaster if we die without
// calling Stop. Go applies Pdeathsig after switching credentials, so the
// kernel does not clear it on the uid change.
func sysProcAttr(ra *runAs) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if ra != nil {
		a.Credential = &syscall.Credential{Uid: ra.uid, Gid: ra.gid}
	}
	return a
}

func platformSupported() error { return nil }
