package main

import "syscall"

// tmpfsMagic is the f_type statfs reports for a tmpfs.
const tmpfsMagic = 0x01021994

// memoryDir returns /dev/shm when it is a tmpfs with at least minFree
// bytes available, else "" (the system's temporary folder). The shared
// cluster creates and drops a database of about a thousand files for
// every test: on ext4 each new file's inode search skips the inodes of
// the files just deleted, which took a fifth of PostgreSQL's CPU in make
// test; on a tmpfs creating a file costs next to nothing
// (docs/reliability.md#time).
func memoryDir() string {
	const dir = "/dev/shm"
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Type != tmpfsMagic {
		return ""
	}
	if uint64(st.Bavail)*uint64(st.Bsize) < minFree {
		return ""
	}
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		return ""
	}
	return dir
}
