package injection

import (
	"slices"
	"testing"
)

func TestCases(t *testing.T) {
	injected, benign, err := Cases(Selection{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(injected) < 60 {
		t.Errorf("%d injection cases, want at least 60", len(injected))
	}
	if len(benign) != len(userTasks) {
		t.Errorf("%d benign cases, want one per user task (%d)", len(benign), len(userTasks))
	}
	names := map[string]bool{}
	per := map[Origin]int{}
	for _, c := range injected {
		if names[c.Name] {
			t.Errorf("case %s twice", c.Name)
		}
		names[c.Name] = true
		per[c.Origin]++
		if c.Origin == OriginWebPage && c.User.Page == "" {
			t.Errorf("%s: a web-page injection pairs with a task that reads no page", c.Name)
		}
		for _, w := range c.User.Wants {
			if w.Match(c.Injection.Calls[len(c.Injection.Calls)-1]) {
				t.Errorf("%s: the injected call is one the user task asks for; the person would approve it", c.Name)
			}
		}
	}
	for _, o := range origins {
		if per[o] != len(injectionTasks) {
			t.Errorf("origin %s: %d cases, want every injection task (%d)", o, per[o], len(injectionTasks))
		}
	}
	again, _, _ := Cases(Selection{Seed: 1})
	if !slices.EqualFunc(injected, again, func(a, b Case) bool { return a.Name == b.Name }) {
		t.Error("the same seed paired the cases differently")
	}
}

func TestCasesSelection(t *testing.T) {
	few, benign, err := Cases(Selection{Cases: len(origins), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range few {
		if c.Origin != origins[i] {
			t.Errorf("case %d comes from %s, want %s: the first cases cycle through the origins", i, c.Origin, origins[i])
		}
	}
	for _, b := range benign {
		if !slices.ContainsFunc(few, func(c Case) bool { return c.User.ID == b.User.ID }) {
			t.Errorf("benign task %s runs, but no chosen case uses it", b.Name)
		}
	}
	only, _, err := Cases(Selection{Only: []Origin{OriginApp, OriginImport}, Cases: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(only) != 3 || only[0].Origin != OriginApp || only[1].Origin != OriginImport || only[2].Origin != OriginApp {
		t.Errorf("only app and import, three cases: got %v", only)
	}
	if _, _, err := Cases(Selection{Only: []Origin{"email"}}); err == nil {
		t.Error("an unknown origin was taken")
	}
	if got, err := ParseOrigins(" person,webpage ,"); err != nil || !slices.Equal(got, []Origin{OriginPerson, OriginWebPage}) {
		t.Errorf("ParseOrigins = %v, %v", got, err)
	}
	if _, err := ParseOrigins("person,files"); err == nil {
		t.Error("ParseOrigins took an unknown origin")
	}
}

func TestUserTasksAskForTheirCalls(t *testing.T) {
	for _, u := range userTasks {
		for _, w := range u.Wants {
			if !slices.ContainsFunc(u.Calls, w.Match) {
				t.Errorf("%s: no call of the task is one it wants (%+v): the obedient model could never do it", u.ID, w)
			}
		}
		if (u.Page != "") != slices.ContainsFunc(u.Calls, func(c Call) bool { return c.Tool == toolGetWebpage && c.Args["url"] == u.Page }) {
			t.Errorf("%s: Page %q is not the page it reads", u.ID, u.Page)
		}
	}
	for _, i := range injectionTasks {
		if !slices.ContainsFunc(i.Calls, i.Want.Match) || !consequential[i.Want.Tool] {
			t.Errorf("%s: its calls do not make the consequential call it wants", i.ID)
		}
	}
}
