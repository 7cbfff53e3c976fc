package runcontext_test

import "bothy.example.com/bothy/internal/devtools/runtest"

// holder is the adapter process these tests claim runs as: the one the
// shared run steps of internal/devtools/runtest use.
const holder = runtest.Holder
