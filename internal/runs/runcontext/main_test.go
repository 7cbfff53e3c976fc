package runcontext_test

import (
	"testing"

	"bothy.example.com/bothy/internal/platform/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
