package intel

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/secops-agent/investigator/internal/clip"
)

// query_otx's general and reputation sections: OTX's answers (only the fields
// used) and the shapes the model sees, with the name helpers they share.

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
		ID          scalar `json:"id"` // no object: it would be decoded whole
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
	case o.ID != "":
		*n = otxName(o.ID)
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
	Tags            list[string, upTo100]  `json:"tags"`
	Adversary       string                 `json:"adversary"`
	MalwareFamilies list[otxName, upTo100] `json:"malware_families"`
	AttackIDs       list[otxName, upTo100] `json:"attack_ids"`
}

type otxRelated struct {
	Adversary       list[otxName, upTo100] `json:"adversary"`
	MalwareFamilies list[otxName, upTo100] `json:"malware_families"`
}

type otxGeneral struct {
	Indicator  string `json:"indicator"`
	TypeTitle  string `json:"type_title"`
	Reputation num    `json:"reputation"`
	PulseInfo  struct {
		Count   int                     `json:"count"`
		Pulses  list[otxPulse, upTo100] `json:"pulses"`
		Related struct {
			AlienVault otxRelated `json:"alienvault"`
			Other      otxRelated `json:"other"`
		} `json:"related"`
	} `json:"pulse_info"`
	Validation list[struct {
		Source  string `json:"source"`
		Message string `json:"message"`
		Name    string `json:"name"`
	}, upTo10] `json:"validation"`
	FalsePositive present `json:"false_positive"`
	ASN           string  `json:"asn"`
	CountryName   string  `json:"country_name"`
	City          string  `json:"city"`
}

type otxReputation struct {
	Reputation *struct {
		ThreatScore num               `json:"threat_score"`
		FirstSeen   string            `json:"first_seen"`
		LastSeen    string            `json:"last_seen"`
		Counts      dict[num, upTo10] `json:"counts"`
		Activities  list[struct {
			Name      string `json:"name"`
			FirstDate string `json:"first_date"`
			LastDate  string `json:"last_date"`
		}, upTo10] `json:"activities"`
		MatchedBL list[otxName, upTo100] `json:"matched_bl"`
		MatchedWL list[otxName, upTo100] `json:"matched_wl"`
	} `json:"reputation"`
}

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
	out := otxGeneralOut{otxHeader: h, PulseCount: max(r.PulseInfo.Count, r.PulseInfo.Pulses.Total),
		ASN: otxText(r.ASN, otxMaxASN), Country: otxText(r.CountryName, otxMaxPlace), City: otxText(r.City, otxMaxPlace)}
	if h.Type == "file" {
		out.FileType = otxText(r.TypeTitle, maxWord)
	}
	if r.Reputation.ok && r.Reputation.v != 0 {
		out.Reputation = r.Reputation.v
	}
	var families, adversaries []string
	for i, p := range r.PulseInfo.Pulses.Items {
		fams := otxNames(p.MalwareFamilies, otxMaxNames)
		families = otxAppendUnique(families, fams...)
		adversaries = otxAppendUnique(adversaries, otxText(p.Adversary, otxMaxName))
		if i >= otxMaxPulses {
			continue
		}
		author := p.Author.Username
		if author == "" {
			author = p.AuthorName
		}
		out.Pulses = append(out.Pulses, otxPulseOut{
			Name:            clip.String(strings.TrimSpace(p.Name), 120),
			Created:         otxDay(p.Created),
			Author:          otxText(author, otxMaxName),
			Tags:            otxFirstN(otxCleanTags(p.Tags.Items), otxMaxTags),
			MalwareFamilies: fams,
			Adversary:       otxText(p.Adversary, otxMaxName),
			AttackIDs:       otxAttackIDs(p.AttackIDs, otxMaxNames),
		})
	}
	for _, rel := range []otxRelated{r.PulseInfo.Related.AlienVault, r.PulseInfo.Related.Other} {
		families = otxAppendUnique(families, otxNames(rel.MalwareFamilies, 100)...)
		adversaries = otxAppendUnique(adversaries, otxNames(rel.Adversary, 100)...)
	}
	out.MalwareFamilies = otxFirstN(families, otxMaxNames)
	out.Adversaries = otxFirstN(adversaries, otxMaxNames)
	for _, v := range r.Validation.Items {
		msg := v.Message
		if msg == "" {
			msg = v.Name
		}
		if v.Source != "" && !strings.Contains(strings.ToLower(msg), strings.ToLower(v.Source)) {
			msg = v.Source + ": " + msg
		}
		if msg != "" && len(out.Validation) < 5 {
			out.Validation = append(out.Validation, clip.String(msg, 120))
		}
	}
	out.FalsePositive = bool(r.FalsePositive)
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
		out.Note += sep + "OTX lists this indicator in validation (whitelist or popularity ranking): widely seen, not proof an activity was authorised; pulses may be noise"
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
	out.ThreatScore = rep.ThreatScore.value()
	out.FirstSeen = otxSecond(rep.FirstSeen)
	out.LastSeen = otxSecond(rep.LastSeen)
	if rep.Counts.Total <= 10 {
		// Counts only: a key is a short label, a value a number.
		for k, v := range rep.Counts.Items {
			if n := v.value(); n != nil && len(k) <= maxWord {
				if out.Counts == nil {
					out.Counts = map[string]any{}
				}
				out.Counts[k] = n
			}
		}
	}
	for _, a := range rep.Activities.Items[:min(len(rep.Activities.Items), otxMaxActivities)] {
		out.Activities = append(out.Activities, otxActivityOut{Name: otxText(a.Name, otxMaxName), FirstSeen: otxSecond(a.FirstDate), LastSeen: otxSecond(a.LastDate)})
	}
	if n := rep.Activities.Total; n > otxMaxActivities {
		out.Omitted = n - otxMaxActivities
		out.Note = fmt.Sprintf("showing %d of %d activities; %d omitted", otxMaxActivities, n, out.Omitted)
	}
	out.Blocklists = otxNames(rep.MatchedBL, otxMaxNames)
	out.Allowlists = otxNames(rep.MatchedWL, otxMaxNames)
	return out
}

// ---- name and time helpers ----

func otxNames(ns list[otxName, upTo100], n int) []string {
	var out []string
	for _, x := range ns.Items {
		out = otxAppendUnique(out, otxText(string(x), otxMaxName))
	}
	return otxFirstN(out, n)
}

// attackIDs keeps the ATT&CK technique IDs ("T1027") rather than the long
// display names.
func otxAttackIDs(ns list[otxName, upTo100], n int) []string {
	var out []string
	for _, x := range ns.Items {
		s := strings.TrimSpace(string(x))
		if id, _, ok := strings.Cut(s, " - "); ok {
			s = id
		}
		out = otxAppendUnique(out, otxText(s, maxWord))
	}
	return otxFirstN(out, n)
}

// otxAppendUnique appends the values not yet in list, up to 100 entries,
// more than any caller keeps: an answer with thousands of names costs no
// quadratic time.
func otxAppendUnique(list []string, vs ...string) []string {
	for _, v := range vs {
		if len(list) >= 100 {
			break
		}
		if v != "" && !slices.ContainsFunc(list, func(s string) bool { return strings.EqualFold(s, v) }) {
			list = append(list, v)
		}
	}
	return list
}

func otxCleanTags(ss []string) []string {
	var out []string
	for _, s := range ss {
		out = otxAppendUnique(out, clip.String(strings.TrimSpace(s), 40))
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

// second drops fractions of a second from an OTX timestamp; a longer
// value is no timestamp and is dropped (fits).
func otxSecond(ts string) string {
	if len(ts) > 19 && ts[10] == 'T' {
		return ts[:19]
	}
	return fits(ts, maxTimestamp)
}

// Bounds of OTX's names and text by kind (shape.go has the shared ones):
// OTX's ASN carries the owner's name ("AS15169 google llc").
const (
	otxMaxName  = 80  // a pulse author, adversary, malware family, activity
	otxMaxPlace = 60  // a country name, city or region
	otxMaxASN   = 100 // an AS number with its owner's name
	otxMaxHash  = 128 // the longest hex hash (SHA-512)
)

// otxText is s trimmed and clipped to n bytes.
func otxText(s string, n int) string { return clip.String(strings.TrimSpace(s), n) }

// otxHash is s in lower case when it is a hex hash, else "".
func otxHash(s string) string {
	s = strings.TrimSpace(s)
	if len(s) < 32 || len(s) > otxMaxHash || !otxHexRE.MatchString(s) {
		return ""
	}
	return strings.ToLower(s)
}
