package config

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config holds the checked value of every registry key.
type Config struct {
	values map[string]any
	// set names the keys a file, the environment or With set, whatever
	// the value (IsSet).
	set map[string]bool
}

// Defaults returns a Config with every key at its registry default.
func Defaults() *Config {
	c, err := Load("", nil)
	if err != nil {
		// The defaults are part of the code; a bad one is a programming error.
		panic(err)
	}
	return c
}

// Load builds a Config from the registry defaults, then the YAML file at path
// (skipped when path is empty), then the BOTHY_ variables of environ (a list
// of KEY=VALUE as os.Environ returns). A YAML key that is not in the registry
// or any value that does not parse or is below its minimum gives an error
// naming the key.
func Load(path string, environ []string) (*Config, error) {
	raw := map[string]string{}
	set := map[string]bool{}
	for _, k := range registry {
		raw[k.Name] = k.Default
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		var tree map[string]any
		if err := yaml.Unmarshal(data, &tree); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
		flat := map[string]string{}
		flatten("", tree, flat)
		for name, v := range flat {
			if _, ok := lookup(name); !ok {
				return nil, fmt.Errorf("config file %s: unknown key %s", path, name)
			}
			raw[name] = v
			set[name] = true
		}
	}
	env := map[string]string{}
	for _, kv := range environ {
		if i := strings.IndexByte(kv, '='); i > 0 {
			env[kv[:i]] = kv[i+1:]
		}
	}
	for _, k := range registry {
		if v, ok := env[EnvName(k.Name)]; ok {
			raw[k.Name] = v
			set[k.Name] = true
		}
	}
	c := &Config{values: map[string]any{}, set: set}
	for _, k := range registry {
		v, err := k.check(raw[k.Name])
		if err != nil {
			return nil, err
		}
		c.values[k.Name] = v
	}
	return c, nil
}

// flatten turns a nested YAML tree into dotted keys. Both the nested form
// (ratelimit: {rl.message: {burst: 5}}) and the flat form
// ("ratelimit.rl.message.burst": 5) are accepted.
func flatten(prefix string, node any, out map[string]string) {
	switch n := node.(type) {
	case map[string]any:
		keys := make([]string, 0, len(n))
		for k := range n {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			name := k
			if prefix != "" {
				name = prefix + "." + k
			}
			flatten(name, n[k], out)
		}
	case nil:
		out[prefix] = ""
	default:
		out[prefix] = fmt.Sprint(n)
	}
}

// With returns a copy of c with key name set to raw, checked like a loaded
// value. Tests use it to shrink limits.
func (c *Config) With(name, raw string) (*Config, error) {
	k, ok := lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown config key %s", name)
	}
	v, err := k.check(raw)
	if err != nil {
		return nil, err
	}
	out := &Config{values: make(map[string]any, len(c.values)), set: map[string]bool{name: true}}
	for n, val := range c.values {
		out.values[n] = val
	}
	for n := range c.set {
		out.set[n] = true
	}
	out.values[name] = v
	return out, nil
}

// IsSet reports whether key name was set by the configuration file, the
// environment or With, rather than left at its default: bothy dev
// changes only the defaults it has better ones for (files.storage,
// files.require_scan), never what the developer chose.
func (c *Config) IsSet(name string) bool { return c.set[name] }

// MustWith is With for values known to be valid; it panics otherwise.
func (c *Config) MustWith(name, raw string) *Config {
	out, err := c.With(name, raw)
	if err != nil {
		panic(err)
	}
	return out
}

func (c *Config) get(name string, t Type) any {
	k, ok := lookup(name)
	if !ok || k.Type != t {
		panic(fmt.Sprintf("config: key %s is not a registered %s key", name, t))
	}
	return c.values[name]
}

// Int returns the value of the int key name. It panics when name is not a
// registered int key, which is a programming error.
func (c *Config) Int(name string) int { return c.get(name, TypeInt).(int) }

// Duration returns the value of the duration key name; it panics on a key
// that is not a registered duration key.
func (c *Config) Duration(name string) time.Duration {
	return c.get(name, TypeDuration).(time.Duration)
}

// String returns the value of the string key name; it panics on a key that
// is not a registered string key.
func (c *Config) String(name string) string { return c.get(name, TypeString).(string) }

// Bool returns the value of the bool key name; it panics on a key that is
// not a registered bool key.
func (c *Config) Bool(name string) bool { return c.get(name, TypeBool).(bool) }
