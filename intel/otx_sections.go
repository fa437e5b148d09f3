package intel

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/secops-agent/investigator/internal/clip"
)

// query_otx's geo, malware, url_list, passive_dns and analysis sections: OTX's
// answers (only the fields used) and the shapes the model sees.

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
	out := otxGeoOut{otxHeader: h, Country: otxText(r.CountryName, otxMaxPlace), CountryCode: fits(r.CountryCode, maxCountry),
		City: otxText(r.City, otxMaxPlace), Region: otxText(r.Region, otxMaxPlace), Continent: fits(r.ContinentCode, maxCountry),
		ASN: otxText(r.ASN, otxMaxASN), Latitude: r.Latitude, Longitude: r.Longitude}
	if out.Country == "" && out.CountryCode == "" && out.ASN == "" {
		out.Note = "OTX has no geolocation for this indicator"
	}
	return out
}

type otxSampleOut struct {
	Hash           string            `json:"hash"`
	Date           string            `json:"date,omitempty"`
	Detections     map[string]string `json:"detections,omitempty"`
	MoreDetections int               `json:"more_detections,omitempty"`
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
		s := otxSampleOut{Hash: otxHash(d.Hash), Date: otxSecond(d.Date)}
		if s.Date == "" && d.DatetimeInt > 0 {
			s.Date = time.Unix(d.DatetimeInt, 0).UTC().Format("2006-01-02T15:04:05")
		}
		found := map[string]string{}
		for engine, det := range d.Detections {
			if det != nil && strings.TrimSpace(*det) != "" {
				found[engine] = *det
			}
		}
		s.Detections, s.MoreDetections = otxDetections(found)
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
		out.URLs = append(out.URLs, otxURLOut{URL: otxText(u.URL, 200), Date: otxSecond(u.Date), HTTPCode: code})
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
		// A CNAME's address is a name: an address is parsed, a name clipped.
		addr := providerIP(p.Address)
		if addr == "" {
			addr = otxText(p.Address, maxDomain)
		}
		rec := otxDNSOut{Hostname: otxText(p.Hostname, maxDomain), Address: addr, RecordType: fits(p.RecordType, 10),
			First: otxSecond(p.First), Last: otxSecond(p.Last), ASN: otxText(p.ASN, otxMaxASN)}
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
	FileType       string            `json:"file_type,omitempty"`
	FileClass      string            `json:"file_class,omitempty"`
	Size           any               `json:"size,omitempty"`
	Hashes         map[string]string `json:"hashes,omitempty"`
	Detections     map[string]string `json:"detections,omitempty"`
	MoreDetections int               `json:"more_detections,omitempty"`
	SandboxScore   any               `json:"sandbox_score,omitempty"`
	Signatures     []string          `json:"signatures,omitempty"`
}

func shapeOTXAnalysis(h otxHeader, r otxAnalysis) otxAnalysisOut {
	out := otxAnalysisOut{otxHeader: h}
	a := r.Analysis
	if len(a) == 0 {
		out.Note = "OTX has no static or sandbox analysis for this file; try the general section or VirusTotal"
		return out
	}
	info := otxDig(a, "info", "results")
	out.FileType = clip.String(otxStr(info["file_type"]), 120)
	out.FileClass = otxText(otxStr(info["file_class"]), maxWord)
	out.Size = otxNumber(info["filesize"])
	for _, k := range []string{"md5", "sha1", "sha256"} {
		if v := otxHash(otxStr(info[k])); v != "" {
			if out.Hashes == nil {
				out.Hashes = map[string]string{}
			}
			out.Hashes[k] = v
		}
	}
	plugins, _ := a["plugins"].(map[string]any)
	found := map[string]string{}
	for name, p := range plugins {
		pm, _ := p.(map[string]any)
		res, _ := pm["results"].(map[string]any)
		if det := otxStr(res["detection"]); det != "" {
			found[name] = det
		}
	}
	out.Detections, out.MoreDetections = otxDetections(found)
	cuckoo := otxDig(plugins, "cuckoo", "result")
	out.SandboxScore = otxNumber(otxDig(cuckoo, "info")["combined_score"])
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
		out.Signatures = append(out.Signatures, clip.String(d, 100))
	}
	if out.Omitted > 0 {
		out.Note = fmt.Sprintf("showing %d sandbox signatures; %d omitted", otxMaxSignatures, out.Omitted)
	}
	return out
}

// otxDetections keeps at most otxMaxDetections engines' detections, the
// first by engine name (an answer may name any number of engines), each
// name and label clipped, and says how many more there were.
func otxDetections(found map[string]string) (map[string]string, int) {
	if len(found) == 0 {
		return nil, 0
	}
	engines := slices.Sorted(maps.Keys(found))
	out := map[string]string{}
	for _, e := range engines[:min(len(engines), otxMaxDetections)] {
		out[otxText(e, maxWord)] = otxText(found[e], 80)
	}
	return out, len(engines) - min(len(engines), otxMaxDetections)
}

// OTX's analysis section is loosely typed: these read it without failing on
// an unexpected shape.

// otxDig follows nested objects by key; a missing one gives nil.
func otxDig(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, _ := m[k].(map[string]any)
		m = next
	}
	return m
}

// otxStr reads a string, number or boolean as trimmed text.
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

// otxInt reads a number or a numeric string; anything else is 0.
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
