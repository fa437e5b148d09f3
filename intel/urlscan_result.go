package intel

import (
	"context"
	"regexp"
	"strings"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/upstream"
	"github.com/secops-agent/investigator/tools"
)

// urlscan_result shapes one finished URLScan.io scan (GET
// /api/v1/result/{uuid}/) into its verdicts, page and capped lists.

const (
	// usListCap bounds each list (ips, domains, ...) of a result.
	usListCap = 15
	// usURLListCap bounds the longer lists (urls, hashes).
	usURLListCap = 10
	// usCertListCap bounds the certificates of a result.
	usCertListCap = 5
)

var usUUID = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func newURLScanResult(c *client) tools.Tool { return urlscanResult{c} }

type urlscanResult struct{ c *client }

// RateGroup: calls share the provider's quota (tools.RateLimited).
func (urlscanResult) RateGroup() string { return GroupURLScan }

func (urlscanResult) Purpose() string {
	return "Read one URLScan.io scan in full (contacted hosts, verdicts, page details) by its uuid."
}

func (urlscanResult) Declaration() *genai.FunctionDeclaration { return urlscanResultDeclaration }

// usResultResponse is the part of the documented GET /api/v1/result/{uuid}/
// answer that the tool reads (the large data/meta sections are skipped).
type usResultResponse struct {
	Task struct {
		UUID       string `json:"uuid"`
		Time       string `json:"time"`
		URL        string `json:"url"`
		Visibility string `json:"visibility"`
		ReportURL  string `json:"reportURL"`
	} `json:"task"`
	Page struct {
		URL        string `json:"url"`
		Domain     string `json:"domain"`
		IP         string `json:"ip"`
		Country    string `json:"country"`
		Server     string `json:"server"`
		Title      string `json:"title"`
		Status     scalar `json:"status"`
		ASN        scalar `json:"asn"`
		ASNName    string `json:"asnname"`
		Redirected string `json:"redirected"`
	} `json:"page"`
	Verdicts struct {
		Overall usVerdictDetail `json:"overall"`
		URLScan usVerdictDetail `json:"urlscan"`
		Engines struct {
			Score          *float64                `json:"score"`
			Malicious      list[usvtName, upTo100] `json:"malicious"`
			MaliciousTotal int                     `json:"maliciousTotal"`
			BenignTotal    int                     `json:"benignTotal"`
			EnginesTotal   int                     `json:"enginesTotal"`
			Categories     list[usvtName, upTo100] `json:"categories"`
		} `json:"engines"`
		Community struct {
			VotesTotal     int `json:"votesTotal"`
			VotesMalicious int `json:"votesMalicious"`
			VotesBenign    int `json:"votesBenign"`
		} `json:"community"`
	} `json:"verdicts"`
	Lists struct {
		IPs          list[string, upTo100] `json:"ips"`
		Countries    list[string, upTo100] `json:"countries"`
		Domains      list[string, upTo100] `json:"domains"`
		URLs         list[string, upTo100] `json:"urls"`
		Hashes       list[string, upTo100] `json:"hashes"`
		Certificates list[struct {
			SubjectName string  `json:"subjectName"`
			Issuer      string  `json:"issuer"`
			ValidFrom   float64 `json:"validFrom"`
			ValidTo     float64 `json:"validTo"`
		}, upTo10] `json:"certificates"`
	} `json:"lists"`
	Stats struct {
		Malicious        *int     `json:"malicious"`
		UniqCountries    *int     `json:"uniqCountries"`
		TotalLinks       *int     `json:"totalLinks"`
		SecureRequests   *int     `json:"secureRequests"`
		SecurePercentage *float64 `json:"securePercentage"`
		AdBlocked        *int     `json:"adBlocked"`
	} `json:"stats"`
}

type usVerdictDetail struct {
	Score      *float64                `json:"score"`
	Malicious  *bool                   `json:"malicious"`
	Categories list[usvtName, upTo100] `json:"categories"`
	Brands     list[usvtName, upTo100] `json:"brands"`
	Tags       list[usvtName, upTo100] `json:"tags"`
}

type usVerdictOut struct {
	Malicious  *bool    `json:"malicious,omitempty"`
	Score      *float64 `json:"score,omitempty"`
	Categories []string `json:"categories,omitempty"`
	Brands     []string `json:"brands,omitempty"`
	Tags       []string `json:"tags,omitempty"`
}

func (v usVerdictDetail) shape() *usVerdictOut {
	o := usVerdictOut{
		Malicious:  v.Malicious,
		Score:      v.Score,
		Categories: usvtNames(v.Categories, 8),
		Brands:     usvtNames(v.Brands, 8),
		Tags:       usvtNames(v.Tags, 8),
	}
	if o.Malicious == nil && o.Score == nil && o.Categories == nil && o.Brands == nil && o.Tags == nil {
		return nil
	}
	return &o
}

type usCert struct {
	Subject   string `json:"subject"`
	Issuer    string `json:"issuer,omitempty"`
	ValidFrom string `json:"valid_from,omitempty"`
	ValidTo   string `json:"valid_to,omitempty"`
}

type usResultOut struct {
	UUID           string        `json:"uuid"`
	Found          bool          `json:"found"`
	Note           string        `json:"note,omitempty"`
	ScannedAt      string        `json:"scanned_at,omitempty"`
	SubmittedURL   string        `json:"submitted_url,omitempty"`
	ReportURL      string        `json:"report_url,omitempty"`
	Visibility     string        `json:"visibility,omitempty"`
	Page           *usPageOut    `json:"page,omitempty"`
	Verdict        *usVerdictOut `json:"verdict,omitempty"`
	URLScanVerdict *usVerdictOut `json:"urlscan_verdict,omitempty"`
	Engines        *usEnginesOut `json:"engines,omitempty"`
	Community      *usVotesOut   `json:"community,omitempty"`
	Stats          *usStatsOut   `json:"stats,omitempty"`
	Lists          *usListsOut   `json:"lists,omitempty"`
}

type usPageOut struct {
	URL        string `json:"url,omitempty"`
	Domain     string `json:"domain,omitempty"`
	IP         string `json:"ip,omitempty"`
	Country    string `json:"country,omitempty"`
	Server     string `json:"server,omitempty"`
	Title      string `json:"title,omitempty"`
	Status     string `json:"status,omitempty"`
	ASN        string `json:"asn,omitempty"`
	ASNName    string `json:"asn_name,omitempty"`
	Redirected string `json:"redirected,omitempty"`
}

type usEnginesOut struct {
	MaliciousTotal int      `json:"malicious_total"`
	BenignTotal    int      `json:"benign_total"`
	EnginesTotal   int      `json:"engines_total"`
	Malicious      []string `json:"malicious,omitempty"`
	Categories     []string `json:"categories,omitempty"`
}

type usVotesOut struct {
	Total     int `json:"total"`
	Malicious int `json:"malicious"`
	Benign    int `json:"benign"`
}

type usStatsOut struct {
	MaliciousRequests *int     `json:"malicious_requests,omitempty"`
	UniqueCountries   *int     `json:"unique_countries,omitempty"`
	TotalLinks        *int     `json:"total_links,omitempty"`
	SecureRequests    *int     `json:"secure_requests,omitempty"`
	SecurePercentage  *float64 `json:"secure_percentage,omitempty"`
	AdBlocked         *int     `json:"ad_blocked,omitempty"`
}

type usListsOut struct {
	IPs          *usvtList[string] `json:"ips,omitempty"`
	Countries    *usvtList[string] `json:"countries,omitempty"`
	Domains      *usvtList[string] `json:"domains,omitempty"`
	URLs         *usvtList[string] `json:"urls,omitempty"`
	Hashes       *usvtList[string] `json:"hashes,omitempty"`
	Certificates *usvtList[usCert] `json:"certificates,omitempty"`
}

func (t urlscanResult) Call(ctx context.Context, args map[string]any) (any, error) {
	id, err := tools.StringArg(args, "uuid", true, 100)
	if err != nil {
		return nil, err
	}
	if !usUUID.MatchString(id) {
		return nil, tools.Reject("uuid %q is not a URLScan.io scan uuid (expected the form 0e37e828-a9d9-45c0-ac50-1ca579b86c72, as returned by urlscan_search)", clip.String(id, 80))
	}
	id = strings.ToLower(id)
	var r usResultResponse
	err = t.c.get(ctx, "/api/v1/result/"+id+"/", nil, &r)
	if upstream.Is(err, upstream.NotFound) {
		return usResultOut{UUID: id, Found: false,
			Note: "URLScan.io has no finished scan with this uuid: either it does not exist or the scan is still running (results usually appear 10-60 seconds after submission). Retry later, or find scans with urlscan_search."}, nil
	}
	if err != nil {
		return nil, err
	}
	out := usResultOut{
		UUID:         id,
		Found:        true,
		ScannedAt:    fits(r.Task.Time, maxTimestamp),
		SubmittedURL: clip.String(r.Task.URL, 200),
		// Rebuilt from the validated uuid, never the answer's reportURL:
		// a link the analyst follows stays on URLScan.io.
		ReportURL:  "https://urlscan.io/result/" + id + "/",
		Visibility: oneOf(r.Task.Visibility, "public", "unlisted", "private"),
		Page: &usPageOut{
			URL:        clip.String(r.Page.URL, 200),
			Domain:     clip.String(r.Page.Domain, maxDomain),
			IP:         providerIP(r.Page.IP),
			Country:    fits(r.Page.Country, maxCountry),
			Server:     clip.String(r.Page.Server, 60),
			Title:      clip.String(r.Page.Title, 100),
			Status:     fits(string(r.Page.Status), maxStatus),
			ASN:        fits(string(r.Page.ASN), maxASN),
			ASNName:    clip.String(r.Page.ASNName, 60),
			Redirected: fits(r.Page.Redirected, maxWord),
		},
		Verdict:        r.Verdicts.Overall.shape(),
		URLScanVerdict: r.Verdicts.URLScan.shape(),
	}
	if e := r.Verdicts.Engines; e.EnginesTotal > 0 || e.MaliciousTotal > 0 || e.Malicious.Total > 0 {
		out.Engines = &usEnginesOut{
			MaliciousTotal: e.MaliciousTotal, BenignTotal: e.BenignTotal, EnginesTotal: e.EnginesTotal,
			Malicious: usvtNames(e.Malicious, 10), Categories: usvtNames(e.Categories, 8),
		}
	}
	if c := r.Verdicts.Community; c.VotesTotal > 0 {
		out.Community = &usVotesOut{Total: c.VotesTotal, Malicious: c.VotesMalicious, Benign: c.VotesBenign}
	}
	s := r.Stats
	if s.Malicious != nil || s.UniqCountries != nil || s.TotalLinks != nil || s.SecureRequests != nil || s.SecurePercentage != nil || s.AdBlocked != nil {
		out.Stats = &usStatsOut{MaliciousRequests: s.Malicious, UniqueCountries: s.UniqCountries, TotalLinks: s.TotalLinks,
			SecureRequests: s.SecureRequests, SecurePercentage: s.SecurePercentage, AdBlocked: s.AdBlocked}
	}
	l := usListsOut{
		IPs:       usvtCap(r.Lists.IPs, usListCap, 60),
		Countries: usvtCap(r.Lists.Countries, usListCap, 10),
		Domains:   usvtCap(r.Lists.Domains, usListCap, 100),
		URLs:      usvtCap(r.Lists.URLs, usURLListCap, 120),
		Hashes:    usvtCap(r.Lists.Hashes, usURLListCap, 128),
	}
	if n := r.Lists.Certificates.Total; n > 0 {
		certs := &usvtList[usCert]{Total: n}
		for _, c := range r.Lists.Certificates.Items[:min(len(r.Lists.Certificates.Items), usCertListCap)] {
			certs.Items = append(certs.Items, usCert{Subject: clip.String(c.SubjectName, 100), Issuer: clip.String(c.Issuer, 100),
				ValidFrom: usvtUnix(int64(c.ValidFrom)), ValidTo: usvtUnix(int64(c.ValidTo))})
		}
		l.Certificates = certs
	}
	if l != (usListsOut{}) {
		out.Lists = &l
	}
	return out, nil
}
