package alerts

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// recognise fills Source, Type, Severity, Title and ObservedAt from an alert
// object, trying the known shapes before the generic one.
func recognise(m map[string]any) Alert {
	if f, envelope, ok := guardDutyFinding(m); ok {
		a := Alert{
			Source:     SourceGuardDuty,
			Type:       str(f, "type"),
			Title:      str(f, "title"),
			Severity:   guardDutySeverity(field(f, "severity")),
			ObservedAt: firstTime(f, "createdAt", "updatedAt"),
		}
		if a.ObservedAt.IsZero() && envelope != nil {
			a.ObservedAt = firstTime(envelope, "time")
		}
		return a
	}
	if f, res, ok := sccFinding(m); ok {
		category := str(f, "category")
		title := category
		if on := sccResourceLabel(f, res); on != "" {
			title += " on " + on
		}
		return Alert{
			Source:     SourceSCC,
			Type:       category,
			Title:      title,
			Severity:   textSeverity(str(f, "severity")),
			ObservedAt: firstTime(f, "eventTime", "createTime"),
		}
	}
	if a, ok := edrAlert(m); ok {
		return a
	}
	return genericAlert(m)
}

// guardDutyFinding recognises an AWS GuardDuty finding: the finding itself
// (camelCase as in EventBridge, or PascalCase as printed by the AWS CLI), the
// EventBridge envelope {"detail-type": "GuardDuty Finding", "detail": {...}},
// or the AWS CLI's {"Findings": [finding]} with exactly one finding. It
// returns the finding and, for an envelope, the envelope.
func guardDutyFinding(m map[string]any) (finding, envelope map[string]any, ok bool) {
	if str(m, "detail-type") == "GuardDuty Finding" {
		if d := obj(m, "detail"); d != nil {
			return d, m, true
		}
	}
	if list, ok := field(m, "Findings").([]any); ok && len(list) == 1 {
		if f, ok := list[0].(map[string]any); ok && isGuardDuty(f) {
			return f, nil, true
		}
	}
	if isGuardDuty(m) {
		return m, nil, true
	}
	return nil, nil, false
}

func isGuardDuty(m map[string]any) bool {
	if svc := obj(m, "service"); svc != nil && strings.EqualFold(str(svc, "serviceName"), "guardduty") {
		return true
	}
	return field(m, "schemaVersion") != nil && field(m, "accountId") != nil &&
		field(m, "severity") != nil && str(m, "type") != ""
}

// guardDutySeverity maps GuardDuty's 0-10 severity (a number, or a number
// in a string) to a level: below 4 low, below 7 medium, below 9 high, else
// critical. Textual levels are accepted too.
func guardDutySeverity(v any) string {
	if f, ok := number(v); ok {
		return numericSeverity(f)
	}
	if s, ok := v.(string); ok {
		return textSeverity(s)
	}
	return SeverityUnknown
}

// number reads a decoded JSON number (int64 or float64) as a float64.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	}
	return 0, false
}

func numericSeverity(f float64) string {
	switch {
	case math.IsNaN(f) || f < 0 || f > 10:
		return SeverityUnknown
	case f < 4:
		return SeverityLow
	case f < 7:
		return SeverityMedium
	case f < 9:
		return SeverityHigh
	default:
		return SeverityCritical
	}
}

// textSeverity maps a severity word (any case), a priority such as "P2", or
// a 0-10 number written as text, to a level.
func textSeverity(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "low", "info", "informational", "information", "notice", "minor", "p4", "p5":
		return SeverityLow
	case "medium", "moderate", "med", "warning", "warn", "p3":
		return SeverityMedium
	case "high", "major", "p2":
		return SeverityHigh
	case "critical", "crit", "fatal", "emergency", "p1", "p0":
		return SeverityCritical
	// As Chinese appliances write levels.
	case "低", "低危", "低风险", "信息", "提示":
		return SeverityLow
	case "中", "中危", "中风险":
		return SeverityMedium
	case "高", "高危", "高风险":
		return SeverityHigh
	case "严重", "紧急", "致命", "超危":
		return SeverityCritical
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return numericSeverity(f)
	}
	return SeverityUnknown
}

// sccFinding recognises a Google Security Command Center finding: the
// notification / list shape {"finding": {...}, "resource": {...}} or a bare
// finding with category, state and resourceName.
func sccFinding(m map[string]any) (finding, resource map[string]any, ok bool) {
	if f := obj(m, "finding"); f != nil && str(f, "category") != "" {
		return f, obj(m, "resource"), true
	}
	if str(m, "category") != "" && field(m, "state") != nil && str(m, "resourceName") != "" {
		return m, nil, true
	}
	return nil, nil, false
}

// sccResourceLabel names the finding's resource briefly: its display name, or
// the last two segments of its full resource name ("instances/123").
func sccResourceLabel(f, res map[string]any) string {
	if res != nil {
		if s := str(res, "displayName", "display_name"); s != "" {
			return s
		}
	}
	name := str(f, "resourceName")
	if name == "" && res != nil {
		name = str(res, "name")
	}
	segs := strings.Split(strings.Trim(name, "/"), "/")
	if len(segs) > 2 {
		segs = segs[len(segs)-2:]
	}
	return strings.Join(segs, "/")
}

// edrAlert recognises two common EDR shapes: a Microsoft Defender for
// Endpoint alert and a CrowdStrike Falcon DetectionSummaryEvent.
func edrAlert(m map[string]any) (Alert, bool) {
	if str(m, "detectionSource") != "" && (field(m, "machineId") != nil || field(m, "computerDnsName") != nil) {
		return Alert{
			Source:     SourceEDR,
			Type:       firstNonEmpty(str(m, "category"), str(m, "detectionSource")),
			Title:      str(m, "title"),
			Severity:   textSeverity(str(m, "severity")),
			ObservedAt: firstTime(m, "alertCreationTime", "firstEventTime", "lastUpdateTime"),
		}, true
	}
	if meta := obj(m, "metadata"); meta != nil && str(meta, "eventType") == "DetectionSummaryEvent" {
		ev := obj(m, "event")
		if ev == nil {
			return Alert{}, false
		}
		sev := textSeverity(str(ev, "SeverityName"))
		if sev == SeverityUnknown {
			sev = falconSeverity(field(ev, "Severity"))
		}
		observed := firstTime(ev, "ProcessStartTime")
		if observed.IsZero() {
			observed = firstTime(meta, "eventCreationTime")
		}
		return Alert{
			Source:     SourceEDR,
			Type:       firstNonEmpty(str(ev, "Technique"), str(ev, "Tactic"), str(ev, "DetectName")),
			Title:      firstNonEmpty(str(ev, "DetectDescription"), str(ev, "DetectName")),
			Severity:   sev,
			ObservedAt: observed,
		}, true
	}
	return Alert{}, false
}

// falconSeverity maps CrowdStrike's 1-5 severity to a level.
func falconSeverity(v any) string {
	f, ok := number(v)
	if !ok {
		return SeverityUnknown
	}
	switch {
	case f >= 1 && f < 3:
		return SeverityLow
	case f >= 3 && f < 4:
		return SeverityMedium
	case f >= 4 && f < 5:
		return SeverityHigh
	case f == 5:
		return SeverityCritical
	}
	return SeverityUnknown
}

// Field names of WAF, IDS and SIEM exports written in Chinese, which
// genericAlert reads after the English ones.
var (
	zhTypeFields     = []string{"告警类型", "攻击类型", "威胁类型", "事件类型", "告警分类", "事件分类"}
	zhTitleFields    = []string{"告警名称", "事件名称", "规则名称", "威胁名称", "攻击名称", "告警标题", "标题"}
	zhSeverityFields = []string{"危险等级", "威胁等级", "风险等级", "告警级别", "告警等级", "严重程度", "级别", "等级"}
	zhTimeFields     = []string{"发生时间", "告警时间", "攻击时间", "事件时间", "发现时间", "开始时间", "时间"}
)

// genericAlert takes a best guess from common top-level keys, in English
// and, for exports from Chinese appliances, in Chinese.
func genericAlert(m map[string]any) Alert {
	rule := obj(m, "rule")
	typ := str(m, "type", "category", "alert_type", "alertType", "rule_name", "ruleName", "event_type", "eventType", "rule")
	if typ == "" && rule != nil {
		typ = str(rule, "name", "id")
	}
	if typ == "" {
		typ = str(m, append([]string{"name"}, zhTypeFields...)...)
	}
	title := str(m, "title", "summary", "description", "message", "alert_name", "alertName", "rule_name", "ruleName", "name")
	if title == "" && rule != nil {
		title = str(rule, "description", "name")
	}
	if title == "" {
		title = str(m, zhTitleFields...)
	}

	// A 0-10 number is read for severity only: numeric levels and priorities
	// have no agreed scale or direction, so only words count for them.
	sev := guardDutySeverity(field(m, "severity"))
	for _, k := range append([]string{"severity_label", "severityLabel", "level", "priority"}, zhSeverityFields...) {
		if sev != SeverityUnknown {
			break
		}
		sev = textSeverity(str(m, k))
	}
	if sev == SeverityUnknown && rule != nil {
		sev = guardDutySeverity(field(rule, "severity"))
	}
	observed := firstTime(m, "@timestamp", "timestamp", "time", "eventTime", "event_time",
		"createdAt", "created_at", "creationTime", "detected_at", "detectedAt", "date")
	if observed.IsZero() {
		observed = firstTime(m, zhTimeFields...)
	}
	return Alert{Source: SourceGeneric, Type: typ, Title: title, Severity: sev, ObservedAt: observed}
}

// field returns m[name], or failing that the value of the first key, in
// sorted order, equal to name ignoring case; nil when there is none.
func field(m map[string]any, name string) any {
	if v, ok := m[name]; ok {
		return v
	}
	var match []string
	for k := range m {
		if strings.EqualFold(k, name) {
			match = append(match, k)
		}
	}
	if len(match) == 0 {
		return nil
	}
	sort.Strings(match)
	return m[match[0]]
}

// str returns the first non-blank string value among names.
func str(m map[string]any, names ...string) string {
	for _, n := range names {
		if s, ok := field(m, n).(string); ok && strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

func obj(m map[string]any, name string) map[string]any {
	o, _ := field(m, name).(map[string]any)
	return o
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// firstTime returns the first parsable time among names, else zero.
func firstTime(m map[string]any, names ...string) time.Time {
	for _, n := range names {
		if t := parseTime(field(m, n)); !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999Z0700",
	"2006/01/02 15:04:05.999999999",
	time.RFC1123Z,
	time.RFC1123,
	"2006-01-02",
}

// parseTime reads a timestamp written as text (RFC 3339 and near variants;
// no zone means UTC) or as Unix epoch seconds, milliseconds, microseconds or
// nanoseconds. It returns UTC truncated to microseconds, Firestore's
// precision, or zero when v is not a plausible time.
func parseTime(v any) time.Time {
	var t time.Time
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		if s == "" {
			return time.Time{}
		}
		for _, layout := range timeLayouts {
			if p, err := time.Parse(layout, s); err == nil {
				t = p
				break
			}
		}
		if t.IsZero() {
			if f, err := strconv.ParseFloat(s, 64); err == nil {
				t = epoch(f)
			}
		}
	case float64:
		t = epoch(x)
	case int64:
		t = epochInt(x)
	}
	if t.IsZero() || t.Year() < 1970 || t.Year() > 9999 {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// epoch reads a Unix time whose unit is guessed from its magnitude.
func epoch(f float64) time.Time {
	switch {
	case math.IsNaN(f) || f <= 0 || f >= 1e19:
		return time.Time{}
	case f < 1e11: // seconds, up to the year 5138
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9))
	case f < 1e14:
		return time.UnixMicro(int64(f * 1e3))
	case f < 1e17:
		return time.UnixMicro(int64(f))
	default:
		return time.Unix(0, int64(f))
	}
}

// epochInt is epoch for an integer, exact also for nanoseconds (where a
// float64 would be off by hundreds).
func epochInt(i int64) time.Time {
	switch {
	case i <= 0:
		return time.Time{}
	case i < 1e11:
		return time.Unix(i, 0)
	case i < 1e14:
		return time.UnixMilli(i)
	case i < 1e17:
		return time.UnixMicro(i)
	default:
		return time.Unix(0, i)
	}
}
