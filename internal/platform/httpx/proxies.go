package httpx

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the reverse proxies whose X-Forwarded-For is believed
// (config key http.trusted_proxies). The zero value trusts none.
type Proxies struct {
	nets []netip.Prefix
}

// ParseProxies reads a comma-separated list of IP addresses and CIDR
// ranges. The error names the entry that does not parse.
func ParseProxies(list string) (Proxies, error) {
	var p Proxies
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			pre, err := netip.ParsePrefix(f)
			if err != nil {
				return Proxies{}, fmt.Errorf("http.trusted_proxies: %q is not an IP address or CIDR range", f)
			}
			p.nets = append(p.nets, pre.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return Proxies{}, fmt.Errorf("http.trusted_proxies: %q is not an IP address or CIDR range", f)
		}
		a = a.Unmap()
		p.nets = append(p.nets, netip.PrefixFrom(a, a.BitLen()))
	}
	return p, nil
}

func (p Proxies) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// Client returns the client address of r: the peer address, unless the peer
// is a trusted proxy, in which case X-Forwarded-For is read from the right
// and the first address not of a trusted proxy is the client (entries left
// of it could be forged by the client). A forwarded entry that is not an
// address ends the walk at the last trusted hop.
func (p Proxies) Client(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !p.trusted(peer) {
		return host
	}
	client := peer
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		if h == "" {
			continue
		}
		a, err := netip.ParseAddr(h)
		if err != nil {
			break
		}
		client = a.Unmap()
		if !p.trusted(client) {
			break
		}
	}
	return client.String()
}
