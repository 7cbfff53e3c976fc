//go:build !linux

package main

// memoryDir returns "" (the system's temporary folder): only Linux's
// /dev/shm is known to be a tmpfs.
func memoryDir() string { return "" }
