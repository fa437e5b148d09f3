package intel

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/upstream"
	"github.com/secops-agent/investigator/tools"
)

// VirusTotal API v3 object reports (read only: the tool never submits
// anything for analysis).

// Caps of the lists a virustotal_lookup result carries; what is cut is
// reported in the note.
const (
	vtMaxFlagged    = 10 // engines listed as flagging the resource
	vtMaxTags       = 10
	vtMaxNames      = 5 // file names
	vtMaxCategories = 8
)

var vtHash = regexp.MustCompile(`^[0-9a-fA-F]+$`)

func newVirusTotal(c *client) tools.Tool { return virusTotal{c} }

type virusTotal struct{ c *client }

// RateGroup: calls share the provider's quota (tools.RateLimited).
func (virusTotal) RateGroup() string { return GroupVirusTotal }

func (virusTotal) Purpose() string {
	return "VirusTotal verdicts from dozens of engines for an IP, domain, URL or file hash."
}

func (virusTotal) Declaration() *genai.FunctionDeclaration { return virusTotalDeclaration }

// vtResponse is the documented {data:{id, type, attributes}} object report.
type vtResponse struct {
	Data struct {
		ID         string `json:"id"`
		Type       string `json:"type"`
		Attributes struct {
			LastAnalysisStats   *vtStats              `json:"last_analysis_stats"`
			LastAnalysisDate    int64                 `json:"last_analysis_date"`
			LastAnalysisResults vtFlaggedResults      `json:"last_analysis_results"`
			Reputation          *int                  `json:"reputation"`
			TotalVotes          *vtVotes              `json:"total_votes"`
			Tags                list[string, upTo100] `json:"tags"`
			Categories          dict[string, upTo100] `json:"categories"`
			Country             string                `json:"country"`
			ASOwner             string                `json:"as_owner"`
			ASN                 int64                 `json:"asn"`
			Network             string                `json:"network"`
			MeaningfulName      string                `json:"meaningful_name"`
			TypeDescription     string                `json:"type_description"`
			Size                int64                 `json:"size"`
			Names               list[string, upTo100] `json:"names"`
			FirstSubmissionDate int64                 `json:"first_submission_date"`
			SHA256              string                `json:"sha256"`
			URL                 string                `json:"url"`
			LastFinalURL        string                `json:"last_final_url"`
			Title               string                `json:"title"`
			Registrar           string                `json:"registrar"`
			CreationDate        int64                 `json:"creation_date"`
			PopularThreat       *struct {
				Label string `json:"suggested_threat_label"`
			} `json:"popular_threat_classification"`
		} `json:"attributes"`
	} `json:"data"`
}

type vtStats struct {
	Malicious  int `json:"malicious"`
	Suspicious int `json:"suspicious"`
	Undetected int `json:"undetected"`
	Harmless   int `json:"harmless"`
	Timeout    int `json:"timeout"`
}

type vtVotes struct {
	Harmless  int `json:"harmless"`
	Malicious int `json:"malicious"`
}

type vtEngineResult struct {
	Category   string `json:"category"`
	Result     string `json:"result"`
	EngineName string `json:"engine_name"`
}

type vtFlag struct {
	Engine   string `json:"engine"`
	Category string `json:"category"`
	Result   string `json:"result,omitempty"`
}

type vtOut struct {
	ResourceType     string   `json:"resource_type"`
	Resource         string   `json:"resource"`
	Found            bool     `json:"found"`
	Note             string   `json:"note,omitempty"`
	Link             string   `json:"link,omitempty"`
	LastAnalysisDate string   `json:"last_analysis_date,omitempty"`
	Stats            *vtStats `json:"stats,omitempty"`
	Reputation       *int     `json:"reputation,omitempty"`
	Votes            *vtVotes `json:"community_votes,omitempty"`
	Tags             []string `json:"tags,omitempty"`
	// ip
	Country string `json:"country,omitempty"`
	ASOwner string `json:"as_owner,omitempty"`
	ASN     int64  `json:"asn,omitempty"`
	Network string `json:"network,omitempty"`
	// domain
	Registrar    string `json:"registrar,omitempty"`
	CreationDate string `json:"creation_date,omitempty"`
	// url
	URL          string `json:"url,omitempty"`
	LastFinalURL string `json:"last_final_url,omitempty"`
	Title        string `json:"title,omitempty"`
	// domain, url
	Categories []string `json:"categories,omitempty"`
	// file
	MeaningfulName      string   `json:"meaningful_name,omitempty"`
	TypeDescription     string   `json:"type_description,omitempty"`
	Size                int64    `json:"size,omitempty"`
	Names               []string `json:"names,omitempty"`
	FirstSubmissionDate string   `json:"first_submission_date,omitempty"`
	ThreatLabel         string   `json:"threat_label,omitempty"`
	SHA256              string   `json:"sha256,omitempty"`

	Flagged       []vtFlag `json:"flagged,omitempty"`
	FlaggedByMore int      `json:"flagged_by_more,omitempty"`
}

func (t virusTotal) Call(ctx context.Context, args map[string]any) (any, error) {
	kind, err := tools.StringArg(args, "resource_type", true, 20)
	if err != nil {
		return nil, err
	}
	res, err := tools.StringArg(args, "resource", true, 2048)
	if err != nil {
		return nil, err
	}
	kind, res, path, gui, err := vtTarget(strings.ToLower(kind), res)
	if err != nil {
		return nil, err
	}
	var r vtResponse
	err = t.c.get(ctx, path, nil, &r)
	if upstream.Is(err, upstream.NotFound) {
		return vtOut{ResourceType: kind, Resource: res, Found: false, Note: vtNotFoundNote(kind)}, nil
	}
	if err != nil {
		return nil, err
	}
	a := r.Data.Attributes
	out := vtOut{
		ResourceType:     kind,
		Resource:         clip.String(res, 300),
		Found:            true,
		LastAnalysisDate: usvtUnix(a.LastAnalysisDate),
		Stats:            a.LastAnalysisStats,
		Reputation:       a.Reputation,
		Votes:            a.TotalVotes,
	}
	var cut vtCuts
	tags, n := usvtClipAll(a.Tags, vtMaxTags, 40)
	out.Tags = cut.keep("tags", tags, n)
	if gui != "" {
		// On VirusTotal's host, from a validated identifier: the answer's
		// data.id only when it is a URL's SHA-256 (what the GUI links).
		id := gui
		if kind == "url" && len(r.Data.ID) == 64 && vtHash.MatchString(r.Data.ID) {
			id = strings.ToLower(r.Data.ID)
		}
		out.Link = "https://www.virustotal.com/gui/" + map[string]string{"ip": "ip-address", "domain": "domain", "url": "url", "file": "file"}[kind] + "/" + id
	}
	switch kind {
	case "ip":
		out.Country, out.ASOwner, out.ASN, out.Network = fits(a.Country, maxCountry), clip.String(a.ASOwner, 80), a.ASN, fits(a.Network, maxNetwork)
	case "domain":
		out.Registrar = clip.String(a.Registrar, 80)
		out.CreationDate = usvtUnix(a.CreationDate)
	case "url":
		if a.URL != res {
			out.URL = clip.String(a.URL, 300) // VirusTotal's canonical form, when it differs
		}
		if a.LastFinalURL != a.URL && a.LastFinalURL != res {
			out.LastFinalURL = clip.String(a.LastFinalURL, 300)
		}
		out.Title = clip.String(a.Title, 100)
	case "file":
		out.MeaningfulName = clip.String(a.MeaningfulName, 100)
		out.TypeDescription = clip.String(a.TypeDescription, 60)
		out.Size = a.Size
		names, n := usvtClipAll(a.Names, vtMaxNames, 100)
		out.Names = cut.keep("names", names, n)
		out.FirstSubmissionDate = usvtUnix(a.FirstSubmissionDate)
		if a.PopularThreat != nil {
			out.ThreatLabel = clip.String(a.PopularThreat.Label, 80)
		}
		if len(a.SHA256) == 64 && vtHash.MatchString(a.SHA256) {
			out.SHA256 = strings.ToLower(a.SHA256)
		}
	}
	if kind == "domain" || kind == "url" {
		cats, n := usvtSortedValues(a.Categories.Items, vtMaxCategories)
		out.Categories = cut.keep("categories", cats, n)
	}
	out.Flagged, out.FlaggedByMore = vtFlagged(a.LastAnalysisResults)
	out.Note = cut.note()
	return out, nil
}

// vtCuts collects the lists cut to their cap, for the result's note.
type vtCuts struct {
	shown   []string // "10 of 14 tags"
	omitted int
}

// keep returns list, the first items of total, noting the cut under name.
func (c *vtCuts) keep(name string, list []string, total int) []string {
	if total > len(list) {
		c.shown = append(c.shown, fmt.Sprintf("%d of %d %s", len(list), total, name))
		c.omitted += total - len(list)
	}
	return list
}

// note is "showing 10 of 14 tags, 5 of 9 names; 8 omitted", or empty when
// nothing was cut.
func (c vtCuts) note() string {
	if c.omitted == 0 {
		return ""
	}
	return fmt.Sprintf("showing %s; %d omitted", strings.Join(c.shown, ", "), c.omitted)
}

// vtTarget validates the resource for its type and returns the normalised
// type and resource, the API path, and the id used in the web UI link.
func vtTarget(kind, res string) (string, string, string, string, error) {
	switch kind {
	case "ip", "ip_address", "ipv4", "ipv6":
		ip := net.ParseIP(strings.Trim(res, "[]"))
		if ip == nil {
			return "", "", "", "", tools.Reject("resource %q is not an IP address (for a network range, look up one address)", clip.String(res, 80))
		}
		if err := rejectNonPublic(ip); err != nil {
			return "", "", "", "", err
		}
		s := ip.String()
		return "ip", s, "/api/v3/ip_addresses/" + s, s, nil
	case "domain", "hostname":
		d := strings.TrimSuffix(strings.ToLower(res), ".")
		if strings.Contains(d, "://") || strings.ContainsAny(d, "/?#") {
			return "", "", "", "", tools.Reject("resource %q is not a bare domain: give the host name only (e.g. evil.example.com), or use resource_type \"url\" for a URL", clip.String(res, 80))
		}
		if net.ParseIP(strings.Trim(d, "[]")) != nil {
			return "", "", "", "", tools.Reject("resource %q is an IP address: use resource_type \"ip\"", clip.String(res, 80))
		}
		if !vtValidDomain(d) {
			return "", "", "", "", tools.Reject("resource %q is not a domain name (expected labels of letters, digits and '-' separated by dots, e.g. evil.example.com)", clip.String(res, 80))
		}
		if err := rejectInternalDomain(d, `resource_type "ip"`); err != nil {
			return "", "", "", "", err
		}
		return "domain", d, "/api/v3/domains/" + url.PathEscape(d), d, nil
	case "url":
		if err := rejectPassword("resource", "VirusTotal", res); err != nil {
			return "", "", "", "", err
		}
		if err := rejectDotDot("resource", res); err != nil {
			return "", "", "", "", err
		}
		u, err := url.Parse(res)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", "", "", "", tools.Reject("resource %q is not an http(s) URL (e.g. https://evil.example.com/login.php); for a host name use resource_type \"domain\"", clip.String(res, 80))
		}
		if err := rejectInternalHost(u.Hostname()); err != nil {
			return "", "", "", "", err
		}
		// VirusTotal's URL identifier: unpadded URL-safe base64 of the URL.
		id := base64.RawURLEncoding.EncodeToString([]byte(res))
		return "url", res, "/api/v3/urls/" + id, id, nil
	case "file", "hash", "md5", "sha1", "sha256":
		if n := len(res); (n != 32 && n != 40 && n != 64) || !vtHash.MatchString(res) {
			return "", "", "", "", tools.Reject("resource %q is not an MD5, SHA-1 or SHA-256 hash (32, 40 or 64 hex digits)", clip.String(res, 80))
		}
		h := strings.ToLower(res)
		return "file", h, "/api/v3/files/" + h, h, nil
	}
	return "", "", "", "", tools.Reject("resource_type must be ip, domain, url or file, got %q", clip.String(kind, 40))
}

func vtValidDomain(d string) bool {
	if len(d) > 253 || !strings.Contains(d, ".") {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return false
		}
		for _, r := range label {
			if r != '-' && r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				return false
			}
		}
	}
	return true
}

func vtNotFoundNote(kind string) string {
	switch kind {
	case "url":
		return "VirusTotal has no report for this URL: it was never submitted for analysis (this tool does not submit). Not evidence that it is benign; try the domain."
	case "file":
		return "VirusTotal has no report for this file hash: the file was never uploaded. Not evidence that it is benign."
	case "domain":
		return "VirusTotal has no report for this domain: it has not seen it. Not evidence that it is benign."
	}
	return "VirusTotal has no report for this IP address."
}

// vtFlaggedResults reads last_analysis_results, an object with a member per
// engine: the first 100 engines whose verdict is malicious or suspicious,
// and the count of all that are. The others are not kept.
type vtFlaggedResults struct {
	Items map[string]vtEngineResult
	Total int
}

func (f *vtFlaggedResults) UnmarshalJSON(b []byte) error {
	f.Items, f.Total = keepMembers(b, 100, func(_ string, r vtEngineResult) bool {
		return r.Category == "malicious" || r.Category == "suspicious"
	})
	return nil
}

// vtFlagged lists the engines whose verdict is malicious or suspicious,
// malicious first then by engine name, at most vtMaxFlagged, with the count
// of those left out.
func vtFlagged(results vtFlaggedResults) ([]vtFlag, int) {
	var flags []vtFlag
	for name, r := range results.Items {
		if r.EngineName != "" {
			name = r.EngineName
		}
		flags = append(flags, vtFlag{Engine: clip.String(name, 40), Category: r.Category, Result: clip.String(r.Result, 80)})
	}
	sort.Slice(flags, func(i, j int) bool {
		if flags[i].Category != flags[j].Category {
			return flags[i].Category == "malicious"
		}
		return flags[i].Engine < flags[j].Engine
	})
	if len(flags) > vtMaxFlagged {
		flags = flags[:vtMaxFlagged]
	}
	return flags, results.Total - len(flags)
}
