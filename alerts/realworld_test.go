package alerts

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// realWorld are the example alerts exported from appliances.
var realWorld = map[string]bool{"waf-sqli-cn.json": true, "siem-struts2-rce-raw-log.json": true, "ids-webshell-upload-cn.json": true}

// Alerts as WAF, IDS and SIEM appliances export them: Chinese field names
// and values, HTTP requests with CR LF inside strings, a raw event escaped
// twice (a JSON string holding JSON), text escaped twice that is not JSON,
// anonymised addresses (XXX.XXX.7.82, 172.16.*.*) and tokens inside URLs.
// Every indicator is found with the path where it first appears; an
// anonymised address is an ipv4_masked, never an IP; a token is not a hash.
func TestRealWorldAlertIndicators(t *testing.T) {
	for file, want := range map[string]map[string]string{
		"waf-sqli-cn.json": {
			KindIPv4 + " 10.20.3.15":        "目的IP",
			KindDomain + " shop.example.cn": "URL",
			KindDomain + " sqlmap.org":      "请求内容",
			KindURL + " https://shop.example.cn/api/v1/orders?id=1%27%20UNION%20SELECT%20username,password%20FROM%20users--&access_token=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMDA0MiJ9.c2lnbmF0dXJl": "URL",
			KindURL + " https://sqlmap.org":  "请求内容",
			KindIPv4Masked + " XXX.XXX.7.82": "攻击IP",
			KindFilePath + " /api/v1/orders": "请求内容",
		},
		"siem-struts2-rce-raw-log.json": {
			KindIPv4 + " 198.51.100.77":                   "raw_log.http_request", // inside the event escaped twice
			KindIPv4 + " 203.0.113.45":                    "raw_log.src_ip",
			KindIPv4 + " 192.168.10.21":                   "asset.ip",
			KindDomain + " soc.example.cn":                "callback",
			KindDomain + " siem-collector-02":             "device.host",
			KindDomain + " app01.corp.example.cn":         "raw_log.http_request",
			KindMD5 + " 5D41402ABC4B2A76B9719D911017C592": "raw_log.payload_md5",
			KindUser + " 电商事业部":                           "asset.owner",
			KindURL + " https://soc.example.cn/api/alerts/7f3c2e10/ack?token=9b2f6c1e4d8a7b3c&user=analyst01": "callback",
			KindURL + " http://198.51.100.77/x.sh|sh":                                                         "raw_log.http_request",
			KindURL + " http://198.51.100.77/x.sh":                                                            "处置建议", // the full stop 。 is not part of it
			KindFilePath + " /struts2-showcase/integration/saveGangster.action":                               "raw_log.http_request",
		},
		"ids-webshell-upload-cn.json": {
			KindIPv4 + " 203.0.113.91":                    "原始日志.sip",
			KindDomain + " oa.internal.example.cn":        "受害主机",
			KindDomain + " evil-c2.example.net":           "回连地址",
			KindMD5 + " 8f14e45fceea167a5a36dedd4bea2543": "文件MD5",
			KindUser + " www-data":                        "用户名",
			KindURL + " http://evil-c2.example.net:8443/beacon?token=QWxhZGRpbjpvcGVuIHNlc2FtZQ": "回连地址",
			KindIPv4Masked + " 172.16.x.x":     "原始日志.dip",
			KindIPv4Masked + " 172.16.*.*":     "目的IP",
			KindFilePath + " /upload/file.php": "原始日志.uri",
		},
	} {
		t.Run(file, func(t *testing.T) {
			got := map[string]string{}
			for _, in := range Indicators(parseExample(t, file).Data) {
				got[in.Kind+" "+in.Value] = in.Path
			}
			assert.Equal(t, want, got)
		})
	}
}

// The rules the exports above need, each on its own.
func TestMessyTextRules(t *testing.T) {
	kinds := func(s string) map[string]string {
		got := map[string]string{}
		for _, in := range Indicators(map[string]any{"text": s}) {
			got[in.Value] = in.Kind
		}
		return got
	}
	// Escaped twice: \r\n and \" as written characters separate values.
	assert.Equal(t, map[string]string{
		"a.example.com": KindDomain, "b.example.org": KindDomain, "http://b.example.org/x": KindURL,
	}, kinds(`hosts:\na.example.com\nb.example.org\r\nReferer:http://b.example.org/x\r\nX: \"y\"`))
	// \\n is an escaped backslash before an n, as in a Windows path.
	assert.Equal(t, map[string]string{`C:\\new\\tools\\a.exe`: KindFilePath}, kinds(`run C:\\new\\tools\\a.exe now \"ok\"`))

	// Anonymised addresses: ipv4_masked, never an IP.
	for _, s := range []string{"XXX.XXX.7.82", "10.x.x.1", "203.0.113.***", "1.2.3.X", "xx.20.3.4"} {
		assert.Equal(t, map[string]string{s: KindIPv4Masked}, kinds("来源 "+s+"，已阻断"), s)
	}
	for _, s := range []string{"x.x.x.x", "XXX.XXX.XXX.XXX", "box.x.1.2", "1.2.3.4x", "256.x.1.1", "1.2.x"} {
		for v, k := range kinds(s) {
			assert.NotEqual(t, KindIPv4Masked, k, "%s: %s", s, v)
			assert.NotEqual(t, KindIPv4, k, "%s: %s", s, v)
		}
	}

	// A hex token in a URL's query is not a hash; a hash in its path is.
	sha := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	got := kinds("cb https://x.example.com/cb?token=5f4dcc3b5aa765d61d8327deb882cf99#sig=" + sha + " and https://www.virustotal.com/gui/file/" + sha)
	assert.Equal(t, KindSHA256, got[sha])
	assert.NotContains(t, got, "5f4dcc3b5aa765d61d8327deb882cf99")

	// A URL ends at CJK punctuation.
	assert.Equal(t, KindURL, kinds("访问了http://evil.example.net/a.php，随后下载")["http://evil.example.net/a.php"])

	// A JSON document held in a string is walked, with its paths.
	found := Indicators(map[string]any{"raw": `{"src":"203.0.113.5","inner":"{\"dst\":\"198.51.100.9\"}"}`})
	require.Len(t, found, 2)
	assert.Equal(t, Indicator{KindIPv4, "198.51.100.9", "raw.inner.dst"}, found[0])
	assert.Equal(t, Indicator{KindIPv4, "203.0.113.5", "raw.src"}, found[1])
}
