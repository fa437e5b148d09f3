package intel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/tools"
)

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

func (otxTool) Purpose() string {
	return "AlienVault OTX threat intelligence for an IP, domain, hostname, URL or file hash: pulses, reputation, malware, passive DNS."
}

func (otxTool) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: "query_otx",
		Description: "Look up an indicator (IP, domain, hostname, URL or file hash) in AlienVault OTX threat intelligence. " +
			"Every result has {indicator, indicator_type, section, found}; found=false means OTX has no data. By section: " +
			"general → {pulse_count, pulses:[{name, created, author, tags, malware_families, adversary, attack_ids}], malware_families, adversaries, validation, reputation, asn, country} " +
			"(pulses are community threat reports naming the indicator; validation lists whitelist/known-good signals); " +
			"reputation (IPs only) → {threat_score, first_seen, last_seen, activities:[{name, first_seen, last_seen}]}; " +
			"geo → {country, country_code, city, asn, latitude, longitude}; " +
			"malware → {total, samples:[{hash, date, detections}]} (files seen talking to it); " +
			"url_list → {total, urls:[{url, date, http_code}]}; " +
			"passive_dns → {total, unique_hostnames, unique_addresses, records:[{hostname, address, record_type, first, last, asn}]} " +
			"(most recently seen first; the queried value and fields shared by all records are given once, not per record); " +
			"analysis (files only) → {file_type, size, hashes, detections, sandbox_score, signatures}. " +
			"Long lists are capped; omitted says how many entries were cut. " +
			"Examples: {indicator:\"198.51.100.23\", indicator_type:\"IPv4\"}; {indicator:\"evil.example.com\", indicator_type:\"domain\", section:\"passive_dns\"}; " +
			"{indicator:\"<sha256 hex>\", indicator_type:\"file\", section:\"analysis\"}.",
		Parameters: &genai.Schema{
			Type: genai.TypeObject,
			Properties: map[string]*genai.Schema{
				"indicator": {Type: genai.TypeString, Description: "The value to look up, e.g. \"198.51.100.23\", \"2001:db8::7\", \"evil.example.com\", " +
					"\"https://evil.example.com/login.php\", or an MD5/SHA1/SHA256 hash such as " +
					"\"275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f\". Defanged forms like 198.51.100[.]23 or hxxp:// are accepted."},
				"indicator_type": {Type: genai.TypeString, Enum: otxTypes, Description: "What the indicator is: IPv4, IPv6, domain (registered domain, e.g. example.com), " +
					"hostname (a host within a domain, e.g. mail.example.com), url, or file (an MD5, SHA1 or SHA256 file hash)."},
				"section": {Type: genai.TypeString, Enum: otxSections, Description: "Which OTX data to fetch; default general. " +
					"reputation: IPv4/IPv6 only. geo, malware, url_list, passive_dns: IPv4/IPv6/domain/hostname (url_list also url). analysis: file only. general: every type."},
			},
			Required: []string{"indicator", "indicator_type"},
		},
	}
}

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
		return nil, tools.Reject("indicator_type must be one of %s, got %q", strings.Join(otxTypes, ", "), typ)
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
		return nil, tools.Reject("section must be one of %s, got %q", strings.Join(otxSections, ", "), section)
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
		var r otxGeneral
		if err = t.c.get(ctx, path, nil, &r); err == nil {
			out = shapeOTXGeneral(head, r)
		}
	case "reputation":
		var r otxReputation
		if err = t.c.get(ctx, path, nil, &r); err == nil {
			out = shapeOTXReputation(head, r)
		}
	case "geo":
		var r otxGeo
		if err = t.c.get(ctx, path, nil, &r); err == nil {
			out = shapeOTXGeo(head, r)
		}
	case "malware":
		var r otxMalware
		if err = t.c.get(ctx, path, nil, &r); err == nil {
			out = shapeOTXMalware(head, r)
		}
	case "url_list":
		var r otxURLList
		if err = t.c.get(ctx, path, nil, &r); err == nil {
			out = shapeOTXURLList(head, r)
		}
	case "passive_dns":
		var r otxPassiveDNS
		if err = t.c.get(ctx, path, nil, &r); err == nil {
			out = shapeOTXPassiveDNS(head, r)
		}
	case "analysis":
		var r otxAnalysis
		if err = t.c.get(ctx, path, nil, &r); err == nil {
			out = shapeOTXAnalysis(head, r)
		}
	}
	if errors.Is(err, errNotFound) {
		head.Found = false
		head.Note = "OTX has no data for this indicator"
		return head, nil
	}
	if err != nil {
		return nil, err
	}
	return out, nil
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
		is4 := ip.To4() != nil && !strings.Contains(v, ":")
		if typ == "IPv4" && !is4 {
			return "", tools.Reject("indicator %q is an IPv6 address; use indicator_type IPv6", raw)
		}
		if typ == "IPv6" && is4 {
			return "", tools.Reject("indicator %q is an IPv4 address; use indicator_type IPv4", raw)
		}
		return ip.String(), nil
	case "domain", "hostname":
		if net.ParseIP(v) != nil {
			return "", tools.Reject("indicator %q is an IP address; use indicator_type IPv4 or IPv6", raw)
		}
		if strings.Contains(v, "://") || strings.ContainsAny(v, "/?#") {
			return "", tools.Reject("indicator %q looks like a URL; use indicator_type url, or pass only the host name such as \"evil.example.com\"", raw)
		}
		if len(v) > 253 || !otxHostRE.MatchString(v) {
			return "", tools.Reject("indicator %q is not a valid %s name (expected something like \"evil.example.com\")", raw, typ)
		}
		return strings.TrimSuffix(strings.ToLower(v), "."), nil
	case "url":
		u, err := url.Parse(v)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return "", tools.Reject("indicator %q is not an http(s) URL (expected something like \"https://evil.example.com/login.php\")", raw)
		}
		if len(v) > 2048 {
			return "", tools.Reject("the URL is %d characters long; OTX looks up URLs of at most 2048", len(v))
		}
		return v, nil
	case "file":
		if !otxHexRE.MatchString(v) || (len(v) != 32 && len(v) != 40 && len(v) != 64) {
			return "", tools.Reject("indicator %q is not a file hash: expected an MD5 (32), SHA1 (40) or SHA256 (64) hex string", raw)
		}
		return strings.ToLower(v), nil
	}
	return "", tools.Reject("unsupported indicator_type %q", typ)
}

// parseLookupIP parses an IP for a threat-intelligence lookup, refusing
// addresses no provider can know anything about.
func parseLookupIP(s string) (net.IP, error) {
	ip := net.ParseIP(s)
	if ip == nil {
		return nil, tools.Reject("%q is not an IP address (expected something like \"198.51.100.23\" or \"2001:db8::7\")", s)
	}
	switch {
	case ip.IsPrivate(), ip.IsLoopback(), ip.IsUnspecified(), ip.IsLinkLocalUnicast(),
		ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast(), ip.IsMulticast():
		return nil, tools.Reject("%s is a private, loopback, link-local or multicast address; threat intelligence has no data about it. "+
			"Investigate it in internal logs instead", ip)
	}
	return ip, nil
}

// refang undoes the usual defanging of indicators: 198.51.100[.]23, hxxp://.
func refang(s string) string {
	s = strings.TrimSpace(s)
	s = strings.NewReplacer("[.]", ".", "(.)", ".", "{.}", ".", "[dot]", ".", "[:]", ":", "[://]", "://").Replace(s)
	lower := strings.ToLower(s)
	for _, p := range []string{"hxxps://", "hxxp://"} {
		if strings.HasPrefix(lower, p) {
			s = "http" + s[4:]
			break
		}
	}
	return s
}

// canonicalEnum matches v case-insensitively against allowed.
func canonicalEnum(v string, allowed []string) (string, bool) {
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			return a, true
		}
	}
	return "", false
}

// ---- OTX response shapes (only the fields used) ----

// otxName decodes either a plain string or an object naming something
// ({display_name}, {name} or {id}), as OTX uses both for malware families,
// attack IDs and industries.
type otxName string

func (n *otxName) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*n = otxName(s)
		return nil
	}
	var o struct {
		ID          any    `json:"id"`
		Name        string `json:"name"`
		DisplayName string `json:"display_name"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return nil // unknown shape: leave empty rather than fail the lookup
	}
	switch {
	case o.DisplayName != "":
		*n = otxName(o.DisplayName)
	case o.Name != "":
		*n = otxName(o.Name)
	case o.ID != nil:
		*n = otxName(fmt.Sprint(o.ID))
	}
	return nil
}

type otxPulse struct {
	Name       string `json:"name"`
	Created    string `json:"created"`
	Modified   string `json:"modified"`
	AuthorName string `json:"author_name"`
	Author     struct {
		Username string `json:"username"`
	} `json:"author"`
	Tags              []string  `json:"tags"`
	Adversary         string    `json:"adversary"`
	MalwareFamilies   []otxName `json:"malware_families"`
	AttackIDs         []otxName `json:"attack_ids"`
	TargetedCountries []string  `json:"targeted_countries"`
}

type otxRelated struct {
	Adversary       []otxName `json:"adversary"`
	MalwareFamilies []otxName `json:"malware_families"`
}

type otxGeneral struct {
	Indicator  string `json:"indicator"`
	TypeTitle  string `json:"type_title"`
	Reputation any    `json:"reputation"`
	PulseInfo  struct {
		Count   int        `json:"count"`
		Pulses  []otxPulse `json:"pulses"`
		Related struct {
			AlienVault otxRelated `json:"alienvault"`
			Other      otxRelated `json:"other"`
		} `json:"related"`
	} `json:"pulse_info"`
	Validation []struct {
		Source  string `json:"source"`
		Message string `json:"message"`
		Name    string `json:"name"`
	} `json:"validation"`
	FalsePositive []json.RawMessage `json:"false_positive"`
	ASN           string            `json:"asn"`
	CountryName   string            `json:"country_name"`
	City          string            `json:"city"`
	Alexa         string            `json:"alexa"`
}

type otxReputation struct {
	Reputation *struct {
		ThreatScore any            `json:"threat_score"`
		FirstSeen   string         `json:"first_seen"`
		LastSeen    string         `json:"last_seen"`
		Counts      map[string]any `json:"counts"`
		Activities  []struct {
			Name      string `json:"name"`
			FirstDate string `json:"first_date"`
			LastDate  string `json:"last_date"`
		} `json:"activities"`
		MatchedBL []otxName `json:"matched_bl"`
		MatchedWL []otxName `json:"matched_wl"`
	} `json:"reputation"`
}

type otxGeo struct {
	CountryName   string   `json:"country_name"`
	CountryCode   string   `json:"country_code"`
	City          string   `json:"city"`
	Region        string   `json:"region"`
	ContinentCode string   `json:"continent_code"`
	ASN           string   `json:"asn"`
	Latitude      *float64 `json:"latitude"`
	Longitude     *float64 `json:"longitude"`
}

type otxMalware struct {
	Count any `json:"count"`
	Data  []struct {
		Hash        string             `json:"hash"`
		Date        string             `json:"date"`
		DatetimeInt int64              `json:"datetime_int"`
		Detections  map[string]*string `json:"detections"`
	} `json:"data"`
}

type otxURLList struct {
	URLList []struct {
		URL      string `json:"url"`
		Date     string `json:"date"`
		HTTPCode int    `json:"httpcode"`
		Result   struct {
			URLWorker struct {
				HTTPCode int    `json:"http_code"`
				IP       string `json:"ip"`
			} `json:"urlworker"`
		} `json:"result"`
	} `json:"url_list"`
	HasNext  bool `json:"has_next"`
	FullSize int  `json:"full_size"`
}

type otxPassiveDNS struct {
	PassiveDNS []otxDNSRecord `json:"passive_dns"`
	Count      int            `json:"count"`
}

type otxDNSRecord struct {
	Address    string `json:"address"`
	Hostname   string `json:"hostname"`
	RecordType string `json:"record_type"`
	First      string `json:"first"`
	Last       string `json:"last"`
	ASN        string `json:"asn"`
}

type otxAnalysis struct {
	Analysis map[string]any `json:"analysis"`
}

// ---- shaped results ----

type otxHeader struct {
	Indicator string `json:"indicator"`
	Type      string `json:"indicator_type"`
	Section   string `json:"section"`
	Found     bool   `json:"found"`
	Omitted   int    `json:"omitted,omitempty"`
	Note      string `json:"note,omitempty"`
}

type otxPulseOut struct {
	Name            string   `json:"name"`
	Created         string   `json:"created,omitempty"`
	Author          string   `json:"author,omitempty"`
	Tags            []string `json:"tags,omitempty"`
	MalwareFamilies []string `json:"malware_families,omitempty"`
	Adversary       string   `json:"adversary,omitempty"`
	AttackIDs       []string `json:"attack_ids,omitempty"`
}

type otxGeneralOut struct {
	otxHeader
	PulseCount      int           `json:"pulse_count"`
	Pulses          []otxPulseOut `json:"pulses,omitempty"`
	MalwareFamilies []string      `json:"malware_families,omitempty"`
	Adversaries     []string      `json:"adversaries,omitempty"`
	Validation      []string      `json:"validation,omitempty"`
	FalsePositive   bool          `json:"false_positive,omitempty"`
	Reputation      any           `json:"reputation,omitempty"`
	ASN             string        `json:"asn,omitempty"`
	Country         string        `json:"country,omitempty"`
	City            string        `json:"city,omitempty"`
	FileType        string        `json:"file_hash_type,omitempty"`
}

func shapeOTXGeneral(h otxHeader, r otxGeneral) otxGeneralOut {
	out := otxGeneralOut{otxHeader: h, PulseCount: max(r.PulseInfo.Count, len(r.PulseInfo.Pulses)),
		ASN: r.ASN, Country: r.CountryName, City: r.City}
	if h.Type == "file" {
		out.FileType = r.TypeTitle
	}
	if rep, ok := r.Reputation.(float64); ok && rep != 0 {
		out.Reputation = rep
	}
	var families, adversaries []string
	for i, p := range r.PulseInfo.Pulses {
		fams := otxNames(p.MalwareFamilies, otxMaxNames)
		families = otxAppendUnique(families, fams...)
		adversaries = otxAppendUnique(adversaries, strings.TrimSpace(p.Adversary))
		if i >= otxMaxPulses {
			continue
		}
		author := p.Author.Username
		if author == "" {
			author = p.AuthorName
		}
		out.Pulses = append(out.Pulses, otxPulseOut{
			Name:            clip(strings.TrimSpace(p.Name), 120),
			Created:         otxDay(p.Created),
			Author:          author,
			Tags:            otxFirstN(otxCleanTags(p.Tags), otxMaxTags),
			MalwareFamilies: fams,
			Adversary:       strings.TrimSpace(p.Adversary),
			AttackIDs:       otxAttackIDs(p.AttackIDs, otxMaxNames),
		})
	}
	for _, rel := range []otxRelated{r.PulseInfo.Related.AlienVault, r.PulseInfo.Related.Other} {
		families = otxAppendUnique(families, otxNames(rel.MalwareFamilies, 100)...)
		adversaries = otxAppendUnique(adversaries, otxNames(rel.Adversary, 100)...)
	}
	out.MalwareFamilies = otxFirstN(families, otxMaxNames)
	out.Adversaries = otxFirstN(adversaries, otxMaxNames)
	for _, v := range r.Validation {
		msg := v.Message
		if msg == "" {
			msg = v.Name
		}
		if v.Source != "" && !strings.Contains(strings.ToLower(msg), strings.ToLower(v.Source)) {
			msg = v.Source + ": " + msg
		}
		if msg != "" && len(out.Validation) < 5 {
			out.Validation = append(out.Validation, clip(msg, 120))
		}
	}
	out.FalsePositive = len(r.FalsePositive) > 0
	switch shown := len(out.Pulses); {
	case out.PulseCount == 0:
		out.Note = "no OTX pulse mentions this indicator"
	case out.PulseCount > shown:
		out.Omitted = out.PulseCount - shown
		out.Note = fmt.Sprintf("showing %d of %d pulses; %d omitted", shown, out.PulseCount, out.Omitted)
	}
	if len(out.Validation) > 0 || out.FalsePositive {
		sep := ""
		if out.Note != "" {
			sep = "; "
		}
		out.Note += sep + "OTX marks this indicator as known/whitelisted or a false positive (see validation); pulses may be noise"
	}
	return out
}

type otxActivityOut struct {
	Name      string `json:"name"`
	FirstSeen string `json:"first_seen,omitempty"`
	LastSeen  string `json:"last_seen,omitempty"`
}

type otxReputationOut struct {
	otxHeader
	ThreatScore any              `json:"threat_score,omitempty"`
	FirstSeen   string           `json:"first_seen,omitempty"`
	LastSeen    string           `json:"last_seen,omitempty"`
	Counts      map[string]any   `json:"counts,omitempty"`
	Activities  []otxActivityOut `json:"activities,omitempty"`
	Blocklists  []string         `json:"blocklists,omitempty"`
	Allowlists  []string         `json:"allowlists,omitempty"`
}

func shapeOTXReputation(h otxHeader, r otxReputation) otxReputationOut {
	out := otxReputationOut{otxHeader: h}
	rep := r.Reputation
	if rep == nil {
		out.Note = "OTX has no reputation record for this IP (no malicious activity recorded); check the general section for pulses"
		return out
	}
	out.ThreatScore = rep.ThreatScore
	out.FirstSeen = otxSecond(rep.FirstSeen)
	out.LastSeen = otxSecond(rep.LastSeen)
	if len(rep.Counts) <= 10 {
		out.Counts = rep.Counts
	}
	for i, a := range rep.Activities {
		if i >= otxMaxActivities {
			out.Omitted = len(rep.Activities) - otxMaxActivities
			out.Note = fmt.Sprintf("showing %d of %d activities; %d omitted", otxMaxActivities, len(rep.Activities), out.Omitted)
			break
		}
		out.Activities = append(out.Activities, otxActivityOut{Name: a.Name, FirstSeen: otxSecond(a.FirstDate), LastSeen: otxSecond(a.LastDate)})
	}
	out.Blocklists = otxNames(rep.MatchedBL, otxMaxNames)
	out.Allowlists = otxNames(rep.MatchedWL, otxMaxNames)
	return out
}

type otxGeoOut struct {
	otxHeader
	Country     string   `json:"country,omitempty"`
	CountryCode string   `json:"country_code,omitempty"`
	City        string   `json:"city,omitempty"`
	Region      string   `json:"region,omitempty"`
	Continent   string   `json:"continent,omitempty"`
	ASN         string   `json:"asn,omitempty"`
	Latitude    *float64 `json:"latitude,omitempty"`
	Longitude   *float64 `json:"longitude,omitempty"`
}

func shapeOTXGeo(h otxHeader, r otxGeo) otxGeoOut {
	out := otxGeoOut{otxHeader: h, Country: r.CountryName, CountryCode: r.CountryCode, City: r.City,
		Region: r.Region, Continent: r.ContinentCode, ASN: r.ASN, Latitude: r.Latitude, Longitude: r.Longitude}
	if out.Country == "" && out.CountryCode == "" && out.ASN == "" {
		out.Note = "OTX has no geolocation for this indicator"
	}
	return out
}

type otxSampleOut struct {
	Hash       string            `json:"hash"`
	Date       string            `json:"date,omitempty"`
	Detections map[string]string `json:"detections,omitempty"`
}

type otxMalwareOut struct {
	otxHeader
	Total   int            `json:"total"`
	Samples []otxSampleOut `json:"samples,omitempty"`
}

func shapeOTXMalware(h otxHeader, r otxMalware) otxMalwareOut {
	out := otxMalwareOut{otxHeader: h, Total: max(otxInt(r.Count), len(r.Data))}
	for i, d := range r.Data {
		if i >= otxMaxMalware {
			break
		}
		s := otxSampleOut{Hash: d.Hash, Date: otxSecond(d.Date)}
		if s.Date == "" && d.DatetimeInt > 0 {
			s.Date = time.Unix(d.DatetimeInt, 0).UTC().Format("2006-01-02T15:04:05")
		}
		for engine, det := range d.Detections {
			if det != nil && strings.TrimSpace(*det) != "" {
				if s.Detections == nil {
					s.Detections = map[string]string{}
				}
				s.Detections[engine] = clip(strings.TrimSpace(*det), 80)
			}
		}
		out.Samples = append(out.Samples, s)
	}
	switch shown := len(out.Samples); {
	case out.Total == 0:
		out.Note = "OTX knows no malware samples associated with this indicator"
	case out.Total > shown:
		out.Omitted = out.Total - shown
		out.Note = fmt.Sprintf("showing the %d most recent of %d samples; %d omitted", shown, out.Total, out.Omitted)
	}
	return out
}

type otxURLOut struct {
	URL      string `json:"url"`
	Date     string `json:"date,omitempty"`
	HTTPCode int    `json:"http_code,omitempty"`
}

type otxURLListOut struct {
	otxHeader
	Total int         `json:"total"`
	URLs  []otxURLOut `json:"urls,omitempty"`
}

func shapeOTXURLList(h otxHeader, r otxURLList) otxURLListOut {
	out := otxURLListOut{otxHeader: h, Total: max(r.FullSize, len(r.URLList))}
	for i, u := range r.URLList {
		if i >= otxMaxURLs {
			break
		}
		code := u.Result.URLWorker.HTTPCode
		if code == 0 {
			code = u.HTTPCode
		}
		out.URLs = append(out.URLs, otxURLOut{URL: clip(u.URL, 200), Date: otxSecond(u.Date), HTTPCode: code})
	}
	shown := len(out.URLs)
	switch {
	case out.Total == 0:
		out.Note = "OTX knows no URLs for this indicator"
	case out.Total > shown:
		out.Omitted = out.Total - shown
		out.Note = fmt.Sprintf("showing %d of %d URLs; %d omitted", shown, out.Total, out.Omitted)
	case r.HasNext:
		out.Note = "OTX has more URLs than shown"
	}
	return out
}

type otxDNSOut struct {
	Hostname   string `json:"hostname,omitempty"`
	Address    string `json:"address,omitempty"`
	RecordType string `json:"record_type,omitempty"`
	First      string `json:"first,omitempty"`
	Last       string `json:"last,omitempty"`
	ASN        string `json:"asn,omitempty"`
}

type otxPassiveDNSOut struct {
	otxHeader
	Total           int         `json:"total"`
	UniqueHostnames int         `json:"unique_hostnames"`
	UniqueAddresses int         `json:"unique_addresses"`
	RecordType      string      `json:"record_type,omitempty"` // when every record shown has it
	ASN             string      `json:"asn,omitempty"`         // when every record shown has it
	Records         []otxDNSOut `json:"records,omitempty"`
}

func shapeOTXPassiveDNS(h otxHeader, r otxPassiveDNS) otxPassiveDNSOut {
	recs := slices.Clone(r.PassiveDNS)
	// Most recently seen first.
	slices.SortStableFunc(recs, func(a, b otxDNSRecord) int {
		return strings.Compare(b.Last, a.Last)
	})
	hosts, addrs := map[string]bool{}, map[string]bool{}
	out := otxPassiveDNSOut{otxHeader: h, Total: max(r.Count, len(recs))}
	for i, p := range recs {
		hosts[strings.ToLower(p.Hostname)] = true
		addrs[p.Address] = true
		if i >= otxMaxPassiveDNS {
			continue
		}
		rec := otxDNSOut{Hostname: p.Hostname, Address: p.Address, RecordType: p.RecordType,
			First: otxSecond(p.First), Last: otxSecond(p.Last), ASN: p.ASN}
		// The queried value repeats in every record; leave it out.
		if strings.EqualFold(rec.Hostname, h.Indicator) {
			rec.Hostname = ""
		}
		if rec.Address == h.Indicator {
			rec.Address = ""
		}
		out.Records = append(out.Records, rec)
	}
	// A value shared by every record shown is given once.
	if n := len(out.Records); n > 1 {
		sameType, sameASN := true, true
		for _, r := range out.Records[1:] {
			sameType = sameType && r.RecordType == out.Records[0].RecordType
			sameASN = sameASN && r.ASN == out.Records[0].ASN
		}
		if sameType {
			out.RecordType = out.Records[0].RecordType
		}
		if sameASN {
			out.ASN = out.Records[0].ASN
		}
		for i := range out.Records {
			if sameType {
				out.Records[i].RecordType = ""
			}
			if sameASN {
				out.Records[i].ASN = ""
			}
		}
	}
	delete(hosts, "")
	delete(addrs, "")
	out.UniqueHostnames, out.UniqueAddresses = len(hosts), len(addrs)
	shown := len(out.Records)
	switch {
	case out.Total == 0:
		out.Note = "OTX has no passive DNS records for this indicator"
	case out.Total > shown:
		out.Omitted = out.Total - shown
		out.Note = fmt.Sprintf("showing the %d most recently seen of %d records; %d omitted (unique counts cover the records OTX returned)",
			shown, out.Total, out.Omitted)
	}
	return out
}

type otxAnalysisOut struct {
	otxHeader
	FileType     string            `json:"file_type,omitempty"`
	FileClass    string            `json:"file_class,omitempty"`
	Size         any               `json:"size,omitempty"`
	Hashes       map[string]string `json:"hashes,omitempty"`
	Detections   map[string]string `json:"detections,omitempty"`
	SandboxScore any               `json:"sandbox_score,omitempty"`
	Signatures   []string          `json:"signatures,omitempty"`
}

func shapeOTXAnalysis(h otxHeader, r otxAnalysis) otxAnalysisOut {
	out := otxAnalysisOut{otxHeader: h}
	a := r.Analysis
	if len(a) == 0 {
		out.Note = "OTX has no static or sandbox analysis for this file; try the general section or VirusTotal"
		return out
	}
	info := otxDig(a, "info", "results")
	out.FileType = clip(otxStr(info["file_type"]), 120)
	out.FileClass = otxStr(info["file_class"])
	out.Size = info["filesize"]
	for _, k := range []string{"md5", "sha1", "sha256"} {
		if v := otxStr(info[k]); v != "" {
			if out.Hashes == nil {
				out.Hashes = map[string]string{}
			}
			out.Hashes[k] = v
		}
	}
	plugins, _ := a["plugins"].(map[string]any)
	for name, p := range plugins {
		pm, _ := p.(map[string]any)
		res, _ := pm["results"].(map[string]any)
		if det := otxStr(res["detection"]); det != "" {
			if out.Detections == nil {
				out.Detections = map[string]string{}
			}
			out.Detections[name] = clip(det, 80)
		}
	}
	cuckoo := otxDig(plugins, "cuckoo", "result")
	if score, ok := otxDig(cuckoo, "info")["combined_score"]; ok {
		out.SandboxScore = score
	}
	sigs, _ := cuckoo["signatures"].([]any)
	for _, s := range sigs {
		sm, _ := s.(map[string]any)
		d := otxStr(sm["description"])
		if d == "" {
			d = otxStr(sm["name"])
		}
		if d == "" {
			continue
		}
		if len(out.Signatures) == otxMaxSignatures {
			out.Omitted++
			continue
		}
		out.Signatures = append(out.Signatures, clip(d, 100))
	}
	if out.Omitted > 0 {
		out.Note = fmt.Sprintf("showing %d sandbox signatures; %d omitted", otxMaxSignatures, out.Omitted)
	}
	return out
}

// ---- small helpers ----

func otxDig(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, _ := m[k].(map[string]any)
		m = next
	}
	return m
}

func otxStr(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case nil:
		return ""
	case float64, bool:
		return fmt.Sprint(x)
	}
	return ""
}

func otxInt(v any) int {
	switch x := v.(type) {
	case float64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return 0
}

func otxNames(ns []otxName, n int) []string {
	var out []string
	for _, x := range ns {
		out = otxAppendUnique(out, strings.TrimSpace(string(x)))
	}
	return otxFirstN(out, n)
}

// attackIDs keeps the ATT&CK technique IDs ("T1027") rather than the long
// display names.
func otxAttackIDs(ns []otxName, n int) []string {
	var out []string
	for _, x := range ns {
		s := strings.TrimSpace(string(x))
		if id, _, ok := strings.Cut(s, " - "); ok {
			s = id
		}
		out = otxAppendUnique(out, s)
	}
	return otxFirstN(out, n)
}

func otxAppendUnique(list []string, vs ...string) []string {
	for _, v := range vs {
		if v != "" && !slices.ContainsFunc(list, func(s string) bool { return strings.EqualFold(s, v) }) {
			list = append(list, v)
		}
	}
	return list
}

func otxCleanTags(ss []string) []string {
	var out []string
	for _, s := range ss {
		out = otxAppendUnique(out, clip(strings.TrimSpace(s), 40))
	}
	return out
}

func otxFirstN(ss []string, n int) []string {
	if len(ss) > n {
		return ss[:n]
	}
	return ss
}

// day keeps the date of an OTX timestamp ("2022-02-09T02:54:38.850000").
func otxDay(ts string) string {
	if len(ts) >= 10 {
		return ts[:10]
	}
	return ts
}

// second drops fractions of a second from an OTX timestamp.
func otxSecond(ts string) string {
	if len(ts) > 19 && ts[10] == 'T' {
		return ts[:19]
	}
	return ts
}
