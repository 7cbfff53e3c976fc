package trust

import "testing"

func TestLowest(t *testing.T) {
	cases := []struct {
		name string
		in   []Level
		want Level
	}{
		{"none fails closed", nil, Unverified},
		{"one", []Level{Trigger}, Trigger},
		{"self below system", []Level{System, Self}, Self},
		{"authorized below trigger", []Level{Trigger, Authorized}, Authorized},
		{"unverified is lowest", []Level{Trigger, Unverified, Self}, Unverified},
		{"unknown counts as unverified", []Level{Trigger, "friend"}, Unverified},
		{"empty counts as unverified", []Level{Trigger, ""}, Unverified},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Lowest(c.in...); got != c.want {
				t.Fatalf("Lowest(%v) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestRankOrdersLevels(t *testing.T) {
	for i := 1; i < len(levels); i++ {
		if Rank(levels[i-1]) >= Rank(levels[i]) {
			t.Fatalf("%s does not rank below %s", levels[i-1], levels[i])
		}
	}
	if Known("friend") || Rank("friend") != Rank(Unverified) {
		t.Fatal("an unknown level must rank as unverified and not be known")
	}
}
