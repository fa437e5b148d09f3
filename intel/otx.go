package intel

import (
	"context"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/upstream"
	"github.com/secops-agent/investigator/tools"
)

// query_otx: AlienVault OTX indicator sections (GET
// /api/v1/indicators/{type}/{indicator}/{section}). The shapes of each
// section's answer are in otx_general.go and otx_sections.go.

// Caps on the lists a query_otx result carries.
const (
	otxMaxPulses     = 10
	otxMaxTags       = 6
	otxMaxNames      = 8
	otxMaxPassiveDNS = 20
	otxMaxURLs       = 15
	otxMaxMalware    = 10
	otxMaxActivities = 10
	otxMaxSignatures = 10
	otxMaxDetections = 10
)

// otxTypes are the indicator types query_otx accepts, in OTX's spelling.
var otxTypes = []string{"IPv4", "IPv6", "domain", "hostname", "url", "file"}

// otxSections are the sections query_otx accepts.
var otxSections = []string{"general", "reputation", "geo", "malware", "url_list", "passive_dns", "analysis"}

// otxSectionsByType lists the sections OTX serves for each indicator type.
var otxSectionsByType = map[string][]string{
	"IPv4":     {"general", "reputation", "geo", "malware", "url_list", "passive_dns"},
	"IPv6":     {"general", "reputation", "geo", "malware", "url_list", "passive_dns"},
	"domain":   {"general", "geo", "malware", "url_list", "passive_dns"},
	"hostname": {"general", "geo", "malware", "url_list", "passive_dns"},
	"url":      {"general", "url_list"},
	"file":     {"general", "analysis"},
}

func newOTX(c *client) tools.Tool { return otxTool{c} }

type otxTool struct{ c *client }

// RateGroup: calls share the provider's quota (tools.RateLimited).
func (otxTool) RateGroup() string { return GroupOTX }

// ThirdPartyText: pulses (their names, tags, authors, malware families,
// adversaries) are written by whoever publishes one, and a pulse may call
// any indicator benign: that text alone does not settle a benign verdict
// (tools.ThirdPartyText). Its counts stay the provider's.
func (otxTool) ThirdPartyText() bool { return true }

func (otxTool) Purpose() string {
	return "AlienVault OTX threat intelligence for an IP, domain, hostname, URL or file hash: pulses, reputation, malware, passive DNS."
}

func (otxTool) Declaration() *genai.FunctionDeclaration { return otxDeclaration }

func (t otxTool) Call(ctx context.Context, args map[string]any) (any, error) {
	raw, err := tools.StringArg(args, "indicator", true, 0)
	if err != nil {
		return nil, err
	}
	typ, err := tools.StringArg(args, "indicator_type", true, 0)
	if err != nil {
		return nil, err
	}
	canon, ok := canonicalEnum(typ, otxTypes)
	if !ok {
		return nil, tools.Reject("indicator_type must be one of %s, got %q", strings.Join(otxTypes, ", "), clip.String(typ, 40))
	}
	typ = canon
	section, err := tools.StringArg(args, "section", false, 0)
	if err != nil {
		return nil, err
	}
	if section == "" {
		section = "general"
	}
	if canon, ok := canonicalEnum(section, otxSections); ok {
		section = canon
	} else {
		return nil, tools.Reject("section must be one of %s, got %q", strings.Join(otxSections, ", "), clip.String(section, 40))
	}
	if !slices.Contains(otxSectionsByType[typ], section) {
		return nil, tools.Reject("OTX has no %q section for indicator_type %s; use one of: %s",
			section, typ, strings.Join(otxSectionsByType[typ], ", "))
	}
	indicator, err := otxIndicator(typ, raw)
	if err != nil {
		return nil, err
	}

	head := otxHeader{Indicator: indicator, Type: typ, Section: section, Found: true}
	path := "/api/v1/indicators/" + typ + "/" + url.PathEscape(indicator) + "/" + section
	var out any
	switch section {
	case "general":
		out, err = otxFetch(ctx, t.c, path, head, shapeOTXGeneral)
	case "reputation":
		out, err = otxFetch(ctx, t.c, path, head, shapeOTXReputation)
	case "geo":
		out, err = otxFetch(ctx, t.c, path, head, shapeOTXGeo)
	case "malware":
		out, err = otxFetch(ctx, t.c, path, head, shapeOTXMalware)
	case "url_list":
		out, err = otxFetch(ctx, t.c, path, head, shapeOTXURLList)
	case "passive_dns":
		out, err = otxFetch(ctx, t.c, path, head, shapeOTXPassiveDNS)
	case "analysis":
		out, err = otxFetch(ctx, t.c, path, head, shapeOTXAnalysis)
	}
	if upstream.Is(err, upstream.NotFound) {
		head.Found = false
		head.Note = "OTX has no data for this indicator"
		return head, nil
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// otxFetch reads one section's answer (R) and shapes it for the model.
func otxFetch[R, O any](ctx context.Context, c *client, path string, h otxHeader, shape func(otxHeader, R) O) (any, error) {
	var r R
	if err := c.get(ctx, path, nil, &r); err != nil {
		return nil, err
	}
	return shape(h, r), nil
}

// ---- argument checks ----

var (
	otxHexRE  = regexp.MustCompile(`^[0-9a-fA-F]+$`)
	otxHostRE = regexp.MustCompile(`^(?i)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.?$`)
)

// otxIndicator checks the indicator's format for its type and returns the
// value to send.
func otxIndicator(typ, raw string) (string, error) {
	v := refang(raw)
	switch typ {
	case "IPv4", "IPv6":
		ip, err := parseLookupIP(v)
		if err != nil {
			return "", err
		}
		// An IPv4-mapped address (::ffff:a.b.c.d) is the IPv4 host a.b.c.d,
		// which is how every tool asks about it (ip.String() unmaps): as
		// IPv6 it would be sent as /IPv6/a.b.c.d.
		is4 := ip.To4() != nil
		if typ == "IPv4" && !is4 {
			return "", tools.Reject("indicator %q is an IPv6 address; use indicator_type IPv6", clip.String(raw, 80))
		}
		if typ == "IPv6" && is4 {
			return "", tools.Reject("indicator %q is an IPv4 address; use indicator_type IPv4", clip.String(raw, 80))
		}
		return ip.String(), nil
	case "domain", "hostname":
		if net.ParseIP(v) != nil {
			return "", tools.Reject("indicator %q is an IP address; use indicator_type IPv4 or IPv6", clip.String(raw, 80))
		}
		if strings.Contains(v, "://") || strings.ContainsAny(v, "/?#") {
			return "", tools.Reject("indicator %q looks like a URL; use indicator_type url, or pass only the host name such as \"evil.example.com\"", clip.String(raw, 80))
		}
		if len(v) > 253 || !otxHostRE.MatchString(v) {
			return "", tools.Reject("indicator %q is not a valid %s name (expected something like \"evil.example.com\")", clip.String(raw, 80), typ)
		}
		if err := rejectInternalDomain(v, "indicator_type IPv4 or IPv6"); err != nil {
			return "", err
		}
		return strings.TrimSuffix(strings.ToLower(v), "."), nil
	case "url":
		if err := rejectPassword("indicator", "OTX", v); err != nil {
			return "", err
		}
		if len(v) > 2048 {
			return "", tools.Reject("the URL is %d characters long; OTX looks up URLs of at most 2048", len(v))
		}
		if err := rejectDotDot("indicator", v); err != nil {
			return "", err
		}
		u, err := url.Parse(v)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return "", tools.Reject("indicator %q is not an http(s) URL (expected something like \"https://evil.example.com/login.php\")", clip.String(raw, 80))
		}
		if err := rejectInternalHost(u.Hostname()); err != nil {
			return "", err
		}
		return v, nil
	case "file":
		if !otxHexRE.MatchString(v) || (len(v) != 32 && len(v) != 40 && len(v) != 64) {
			return "", tools.Reject("indicator %q is not a file hash: expected an MD5 (32), SHA1 (40) or SHA256 (64) hex string", clip.String(raw, 80))
		}
		return strings.ToLower(v), nil
	}
	return "", tools.Reject("unsupported indicator_type %q", clip.String(typ, 40))
}
