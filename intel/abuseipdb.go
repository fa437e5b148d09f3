package intel

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/upstream"
	"github.com/secops-agent/investigator/tools"
)

// abuseIPDBMaxHostnames caps the hostnames an abuseipdb_check result carries.
const abuseIPDBMaxHostnames = 5

func newAbuseIPDB(c *client) tools.Tool { return abuseIPDBTool{c} }

type abuseIPDBTool struct{ c *client }

// RateGroup: calls share the provider's quota (tools.RateLimited).
func (abuseIPDBTool) RateGroup() string { return GroupAbuseIPDB }

func (abuseIPDBTool) Purpose() string {
	return "Community abuse reports for one IP address: confidence score, report count, ISP, Tor exit."
}

func (abuseIPDBTool) Declaration() *genai.FunctionDeclaration { return abuseIPDBDeclaration }

type abuseIPDBResponse struct {
	Data struct {
		IPAddress            string               `json:"ipAddress"`
		IsPublic             *bool                `json:"isPublic"`
		IPVersion            int                  `json:"ipVersion"`
		IsWhitelisted        *bool                `json:"isWhitelisted"`
		AbuseConfidenceScore int                  `json:"abuseConfidenceScore"`
		CountryCode          string               `json:"countryCode"`
		UsageType            string               `json:"usageType"`
		ISP                  string               `json:"isp"`
		Domain               string               `json:"domain"`
		Hostnames            list[string, upTo10] `json:"hostnames"`
		IsTor                bool                 `json:"isTor"`
		TotalReports         int                  `json:"totalReports"`
		NumDistinctUsers     int                  `json:"numDistinctUsers"`
		LastReportedAt       string               `json:"lastReportedAt"`
	} `json:"data"`
}

type abuseIPDBOut struct {
	IPAddress            string   `json:"ip_address"`
	Found                bool     `json:"found"`
	AbuseConfidenceScore int      `json:"abuse_confidence_score"`
	Verdict              string   `json:"verdict"`
	TotalReports         int      `json:"total_reports"`
	NumDistinctUsers     int      `json:"num_distinct_users"`
	LastReportedAt       string   `json:"last_reported_at,omitempty"`
	CountryCode          string   `json:"country_code,omitempty"`
	UsageType            string   `json:"usage_type,omitempty"`
	ISP                  string   `json:"isp,omitempty"`
	Domain               string   `json:"domain,omitempty"`
	Hostnames            []string `json:"hostnames,omitempty"`
	IsTor                bool     `json:"is_tor"`
	IsPublic             *bool    `json:"is_public,omitempty"`
	IsWhitelisted        *bool    `json:"is_whitelisted,omitempty"`
	IPVersion            int      `json:"ip_version,omitempty"`
	MaxAgeDays           int      `json:"max_age_days"`
	Note                 string   `json:"note,omitempty"`
}

func (t abuseIPDBTool) Call(ctx context.Context, args map[string]any) (any, error) {
	raw, err := tools.StringArg(args, "ip", true, 0)
	if err != nil {
		return nil, err
	}
	ip, err := parseLookupIP(refang(raw))
	if err != nil {
		return nil, err
	}
	days, err := tools.IntArg(args, "max_age_days", 90, 1, 365)
	if err != nil {
		return nil, err
	}
	q := url.Values{"ipAddress": {ip.String()}, "maxAgeInDays": {strconv.Itoa(days)}}
	var r abuseIPDBResponse
	err = t.c.get(ctx, "/api/v2/check", q, &r)
	if upstream.Is(err, upstream.NotFound) {
		return abuseIPDBOut{IPAddress: ip.String(), MaxAgeDays: days,
			Verdict: "unknown", Note: "AbuseIPDB has no data for this IP"}, nil
	}
	if err != nil {
		return nil, err
	}
	d := r.Data
	out := abuseIPDBOut{
		IPAddress:            ip.String(), // the address asked, whatever the answer names
		Found:                true,
		AbuseConfidenceScore: d.AbuseConfidenceScore,
		TotalReports:         d.TotalReports,
		NumDistinctUsers:     d.NumDistinctUsers,
		LastReportedAt:       fits(d.LastReportedAt, maxTimestamp),
		CountryCode:          fits(d.CountryCode, maxCountry),
		UsageType:            clip.String(d.UsageType, 60),
		ISP:                  clip.String(d.ISP, 100),
		Domain:               clip.String(d.Domain, maxDomain),
		IsTor:                d.IsTor,
		IsPublic:             d.IsPublic,
		IsWhitelisted:        d.IsWhitelisted,
		IPVersion:            d.IPVersion,
		MaxAgeDays:           days,
	}
	var notes []string
	if d.IPAddress != "" && providerIP(d.IPAddress) != ip.String() {
		// Not echoed: it may be anything, an internal address even.
		notes = append(notes, "AbuseIPDB's answer named another address than the one asked; treat these figures with caution")
	}
	for i, h := range d.Hostnames.Items {
		if i == abuseIPDBMaxHostnames {
			notes = append(notes, fmt.Sprintf("%d more hostnames omitted", d.Hostnames.Total-i))
			break
		}
		out.Hostnames = append(out.Hostnames, clip.String(h, 100))
	}
	out.Note = strings.Join(notes, "; ")
	out.Verdict = abuseIPDBVerdict(out)
	return out, nil
}

// abuseIPDBVerdict reads the confidence score as one line for the model.
func abuseIPDBVerdict(o abuseIPDBOut) string {
	s, n := o.AbuseConfidenceScore, o.TotalReports
	var v string
	switch {
	case s >= 75:
		v = fmt.Sprintf(">= 75: widely reported as abusive (%d reports from %d users in %d days); likely malicious", n, o.NumDistinctUsers, o.MaxAgeDays)
	case s >= 25:
		v = fmt.Sprintf("25-74: reported as abusive by several users (%d reports); suspicious, corroborate with other sources", n)
	case s >= 1:
		v = fmt.Sprintf("1-24: a few abuse reports (%d); weak signal, possibly scanning or a false report", n)
	case n > 0:
		v = fmt.Sprintf("0: %d reports but no abuse confidence (old, disputed or whitelisted)", n)
	default:
		v = fmt.Sprintf("0: no abuse reports in the last %d days", o.MaxAgeDays)
	}
	var extra []string
	if o.IsWhitelisted != nil && *o.IsWhitelisted {
		extra = append(extra, "whitelisted by AbuseIPDB (known legitimate service)")
	}
	if o.IsTor {
		extra = append(extra, "Tor exit node")
	}
	if o.IsPublic != nil && !*o.IsPublic {
		extra = append(extra, "not a public address")
	}
	if len(extra) > 0 {
		v += "; " + strings.Join(extra, "; ")
	}
	return v
}
