package intel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/upstream"
	"github.com/secops-agent/investigator/tools"
)

// urlscan_search finds existing URLScan.io scans (GET /api/v1/search/); it
// never submits a scan: the agent is read-only towards the outside world.

// usSearchBudget bounds the bytes of search entries returned; entries past it
// are counted in "omitted" instead.
const usSearchBudget = 10 << 10

func newURLScanSearch(c *client) tools.Tool { return urlscanSearch{c} }

type urlscanSearch struct{ c *client }

// RateGroup: calls share the provider's quota (tools.RateLimited).
func (urlscanSearch) RateGroup() string { return GroupURLScan }

func (urlscanSearch) Purpose() string {
	return "Find earlier URLScan.io scans of a domain, IP, URL or hash: what a site served and when."
}

func (urlscanSearch) Declaration() *genai.FunctionDeclaration { return urlscanSearchDeclaration }

// usSearchResponse is the documented answer of GET /api/v1/search/.
type usSearchResponse struct {
	Results list[struct {
		ID   string `json:"_id"`
		Task struct {
			UUID       string `json:"uuid"`
			Time       string `json:"time"`
			URL        string `json:"url"`
			Visibility string `json:"visibility"`
			Method     string `json:"method"`
		} `json:"task"`
		Page struct {
			URL     string `json:"url"`
			Domain  string `json:"domain"`
			IP      string `json:"ip"`
			Country string `json:"country"`
			Server  string `json:"server"`
			Status  scalar `json:"status"`
			Title   string `json:"title"`
			ASN     scalar `json:"asn"`
			ASNName string `json:"asnname"`
		} `json:"page"`
		Stats struct {
			Malicious *float64 `json:"malicious"`
		} `json:"stats"`
		Verdicts *usVerdict `json:"verdicts"`
	}, upTo100] `json:"results"`
	Total   int  `json:"total"`
	HasMore bool `json:"has_more"`
}

// usVerdict covers both the flat verdict of search results ({malicious,
// score}) and the overall one of full results ({overall:{malicious, score}}).
type usVerdict struct {
	Malicious *bool    `json:"malicious"`
	Score     *float64 `json:"score"`
	Overall   *struct {
		Malicious *bool    `json:"malicious"`
		Score     *float64 `json:"score"`
	} `json:"overall"`
}

type usSearchEntry struct {
	UUID      string `json:"uuid"`
	Time      string `json:"time,omitempty"`
	URL       string `json:"url,omitempty"`
	Domain    string `json:"domain,omitempty"`
	IP        string `json:"ip,omitempty"`
	Country   string `json:"country,omitempty"`
	Status    string `json:"status,omitempty"`
	Title     string `json:"title,omitempty"`
	ASNName   string `json:"asn_name,omitempty"`
	Malicious *bool  `json:"malicious,omitempty"`
}

type usSearchResult struct {
	Query   string          `json:"query"`
	Total   int             `json:"total"`
	HasMore bool            `json:"has_more"`
	Results []usSearchEntry `json:"results"`
	Omitted int             `json:"omitted,omitempty"`
	Note    string          `json:"note"`
}

func (t urlscanSearch) Call(ctx context.Context, args map[string]any) (any, error) {
	q, err := tools.StringArg(args, "query", true, 1000)
	if err != nil {
		return nil, err
	}
	size, err := tools.IntArg(args, "size", 10, 1, 100)
	if err != nil {
		return nil, err
	}
	if err := rejectPassword("query", "URLScan.io", usUnescape(q)); err != nil {
		return nil, err
	}
	if err := rejectDotDot("query", q); err != nil {
		return nil, err
	}
	if err := rejectInternalQuery(q); err != nil {
		return nil, err
	}
	var resp usSearchResponse
	err = t.c.get(ctx, "/api/v1/search/", url.Values{"q": {q}, "size": {strconv.Itoa(size)}}, &resp)
	if upstream.Is(err, upstream.NotFound) {
		resp = usSearchResponse{} // no index hit is not an error for a search
	} else if err != nil {
		return nil, err
	}
	out := usSearchResult{Query: q, Total: resp.Total, HasMore: resp.HasMore, Results: []usSearchEntry{}}
	used := 0
	for i, r := range resp.Results.Items {
		if i >= size {
			break
		}
		e := usSearchEntry{
			Time:    fits(r.Task.Time, maxTimestamp),
			URL:     clip.String(r.Page.URL, 200),
			Domain:  clip.String(r.Page.Domain, maxDomain),
			IP:      providerIP(r.Page.IP),
			Country: fits(r.Page.Country, maxCountry),
			Status:  fits(string(r.Page.Status), maxStatus),
			Title:   clip.String(r.Page.Title, 100),
			ASNName: clip.String(r.Page.ASNName, 60),
		}
		// The uuid is what urlscan_result is called with: a uuid or none.
		for _, id := range []string{r.Task.UUID, r.ID} {
			if usUUID.MatchString(id) {
				e.UUID = strings.ToLower(id)
				break
			}
		}
		if e.URL == "" {
			e.URL = clip.String(r.Task.URL, 200)
		}
		if v := r.Verdicts; v != nil && v.Overall != nil && v.Overall.Malicious != nil {
			e.Malicious = v.Overall.Malicious
		} else if v != nil && v.Malicious != nil {
			e.Malicious = v.Malicious
		} else if r.Stats.Malicious != nil && *r.Stats.Malicious > 0 {
			// A count of malicious resources; zero is no verdict, not "benign".
			m := true
			e.Malicious = &m
		}
		b, _ := json.Marshal(e)
		if used+len(b) > usSearchBudget {
			out.Omitted = min(resp.Results.Total, size) - i
			break
		}
		used += len(b)
		out.Results = append(out.Results, e)
	}
	switch {
	case len(out.Results) == 0:
		out.Note = "No URLScan.io scan matches this query. Check the field names (domain, page.ip, hash, ...) or widen the query."
	case out.Omitted > 0:
		out.Note = fmt.Sprintf("%d more matching scans were left out to keep the answer small; narrow the query or lower size. Use urlscan_result with a uuid for details.", out.Omitted)
	default:
		out.Note = "Use urlscan_result with a uuid for that scan's verdicts, contacted IPs, domains and hashes."
	}
	return out, nil
}
