package intel

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
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
	Count num `json:"count"`
	Data  list[struct {
		Hash        string                `json:"hash"`
		Date        string                `json:"date"`
		DatetimeInt int64                 `json:"datetime_int"`
		Detections  dict[scalar, upTo100] `json:"detections"`
	}, upTo10] `json:"data"`
}

type otxURLList struct {
	URLList list[struct {
		URL      string `json:"url"`
		Date     string `json:"date"`
		HTTPCode int    `json:"httpcode"`
		Result   struct {
			URLWorker struct {
				HTTPCode int    `json:"http_code"`
				IP       string `json:"ip"`
			} `json:"urlworker"`
		} `json:"result"`
	}, upTo100] `json:"url_list"`
	HasNext  bool `json:"has_next"`
	FullSize int  `json:"full_size"`
}

type otxPassiveDNS struct {
	PassiveDNS list[otxDNSRecord, upTo1000] `json:"passive_dns"`
	Count      int                          `json:"count"`
}

type otxDNSRecord struct {
	Address    string `json:"address"`
	Hostname   string `json:"hostname"`
	RecordType string `json:"record_type"`
	First      string `json:"first"`
	Last       string `json:"last"`
	ASN        string `json:"asn"`
}

// otxAnalysis is the part of OTX's analysis section the tool reads: a file's
// static info, each plugin's detection, and the Cuckoo sandbox's score and
// signatures (the section also holds whole sandbox traces, never decoded).
type otxAnalysis struct {
	Analysis struct {
		Info struct {
			Results struct {
				FileType  scalar `json:"file_type"`
				FileClass scalar `json:"file_class"`
				FileSize  num    `json:"filesize"`
				MD5       scalar `json:"md5"`
				SHA1      scalar `json:"sha1"`
				SHA256    scalar `json:"sha256"`
			} `json:"results"`
		} `json:"info"`
		Plugins otxPlugins `json:"plugins"`
	} `json:"analysis"`
}

// otxPlugins reads OTX's analysis plugins, an object of any number of
// members: the detections of the first 100 that name one, with the count
// of all that do, and the Cuckoo plugin's result.
type otxPlugins struct {
	Detections      map[string]otxPluginDetection
	DetectionsTotal int
	Cuckoo          otxCuckoo
}

type otxCuckoo struct {
	Info struct {
		CombinedScore num `json:"combined_score"`
	} `json:"info"`
	Signatures list[struct {
		Description scalar `json:"description"`
		Name        scalar `json:"name"`
	}, upTo100] `json:"signatures"`
}

// otxPluginDetection is a plugin's results.detection, the rest of the
// plugin skipped.
type otxPluginDetection scalar

func (d *otxPluginDetection) UnmarshalJSON(b []byte) error {
	var p struct {
		Results struct {
			Detection scalar `json:"detection"`
		} `json:"results"`
	}
	*d = ""
	if json.Unmarshal(b, &p) == nil {
		*d = otxPluginDetection(p.Results.Detection)
	}
	return nil
}

func (p *otxPlugins) UnmarshalJSON(b []byte) error {
	*p = otxPlugins{}
	p.Detections, p.DetectionsTotal = keepMembers(b, 100, func(_ string, d otxPluginDetection) bool { return d != "" })
	eachMember(b, func(k, v []byte) {
		var name string
		var c struct {
			Result otxCuckoo `json:"result"`
		}
		if json.Unmarshal(k, &name) == nil && name == "cuckoo" && json.Unmarshal(v, &c) == nil {
			p.Cuckoo = c.Result
		}
	})
	return nil
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
	out := otxMalwareOut{otxHeader: h, Total: max(int(r.Count.v), r.Data.Total)}
	for i, d := range r.Data.Items {
		if i >= otxMaxMalware {
			break
		}
		s := otxSampleOut{Hash: otxHash(d.Hash), Date: otxSecond(d.Date)}
		if s.Date == "" && d.DatetimeInt > 0 {
			s.Date = time.Unix(d.DatetimeInt, 0).UTC().Format("2006-01-02T15:04:05")
		}
		found := map[string]scalar{}
		for engine, det := range d.Detections.Items {
			if det != "" {
				found[engine] = det
			}
		}
		// Engines beyond those decoded count as detecting: a null one is
		// rarely listed past the first hundred.
		s.Detections, s.MoreDetections = otxDetections(found, len(found)+d.Detections.Total-len(d.Detections.Items))
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
	out := otxURLListOut{otxHeader: h, Total: max(r.FullSize, r.URLList.Total)}
	for i, u := range r.URLList.Items {
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
	recs := slices.Clone(r.PassiveDNS.Items)
	// Most recently seen first.
	slices.SortStableFunc(recs, func(a, b otxDNSRecord) int {
		return strings.Compare(b.Last, a.Last)
	})
	hosts, addrs := map[string]bool{}, map[string]bool{}
	out := otxPassiveDNSOut{otxHeader: h, Total: max(r.Count, r.PassiveDNS.Total)}
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
	info, plugins := r.Analysis.Info.Results, r.Analysis.Plugins
	out.FileType = clip.String(string(info.FileType), 120)
	out.FileClass = otxText(string(info.FileClass), maxWord)
	out.Size = info.FileSize.value()
	for k, v := range map[string]scalar{"md5": info.MD5, "sha1": info.SHA1, "sha256": info.SHA256} {
		if v := otxHash(string(v)); v != "" {
			if out.Hashes == nil {
				out.Hashes = map[string]string{}
			}
			out.Hashes[k] = v
		}
	}
	out.Detections, out.MoreDetections = otxDetections(plugins.Detections, plugins.DetectionsTotal)
	out.SandboxScore = plugins.Cuckoo.Info.CombinedScore.value()
	sigs := plugins.Cuckoo.Signatures
	for i, s := range sigs.Items {
		d := string(s.Description)
		if d == "" {
			d = string(s.Name)
		}
		if d == "" {
			continue
		}
		if len(out.Signatures) == otxMaxSignatures {
			out.Omitted = sigs.Total - i // those beyond the first hundred counted whether they name a signature or not
			break
		}
		out.Signatures = append(out.Signatures, clip.String(d, 100))
	}
	if out.Omitted > 0 {
		out.Note = fmt.Sprintf("showing %d sandbox signatures; %d omitted", otxMaxSignatures, out.Omitted)
	}
	if out.FileType == "" && out.FileClass == "" && out.Size == nil && out.Hashes == nil && out.Detections == nil &&
		out.SandboxScore == nil && out.Signatures == nil {
		out.Note = "OTX has no static or sandbox analysis for this file; try the general section or VirusTotal"
	}
	return out
}

// otxDetections keeps at most otxMaxDetections engines' detections, the
// first by engine name among those decoded (an answer may name any number
// of engines), each name and label clipped, and says how many more of the
// total (at least len(found)) there were.
func otxDetections[S ~string](found map[string]S, total int) (map[string]string, int) {
	if len(found) == 0 {
		return nil, 0
	}
	engines := slices.Sorted(maps.Keys(found))
	out := map[string]string{}
	for _, e := range engines[:min(len(engines), otxMaxDetections)] {
		out[otxText(e, maxWord)] = otxText(string(found[e]), 80)
	}
	return out, total - min(len(engines), otxMaxDetections)
}
