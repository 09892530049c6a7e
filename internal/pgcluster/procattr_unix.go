//go:build unix && !linux

package pgcluster

import "syscall"

// sysProcAttr drops to ra (when non-nil) and puts the server in its own
// process group so a terminal's Ctrl-C reaches settle, which then stops the
// cluster in order, rather than the postmaster directly. There is no
// parent-death signal here, so a crashed caller leaks the server.
func sysProcAttr(ra *runAs) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if ra != nil {
		a.Credential = &syscall.Credential{Uid: ra.uid, Gid: ra.gid}
	}
	return a
}

func platformSupported() error { return nil }
