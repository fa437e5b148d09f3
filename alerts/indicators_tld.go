package alerts

import "strings"

// knownTLDs are the top-level domains that make a dotted word in free text
// a domain: the generic ones seen in real traffic and threat feeds, every
// two-letter country code, and the names of internal zones (local,
// internal, corp, lan). Left out on purpose, because alerts use them far
// more often as something else: file extensions that are also TLDs (.sh,
// .py, .pl, .md, .so, .ps, .rs, .zip, .mov) and words that end field paths
// (.name, .id, .host, .email, .network, .group, .zone, .date, as in
// user.name, event.id). A URL's host, an e-mail's domain and a host-name
// field count whatever their TLD.
var knownTLDs = func() map[string]bool {
	m := map[string]bool{}
	for _, list := range []string{genericTLDs, countryTLDs, internalTLDs} {
		for _, t := range strings.Fields(list) {
			m[t] = true
		}
	}
	for _, t := range strings.Fields(excludedTLDs) {
		delete(m, t)
	}
	return m
}()

const genericTLDs = `com net org edu gov mil int info biz pro aero asia cat coop jobs mobi museum post tel
travel xxx arpa onion app dev page cloud online site website space store shop tech xyz top club
live life world today news blog click link fun icu buzz work vip win bid loan men stream download
review racing party science trade cricket accountant faith webcam gdn kim ltd wang ren rest cyou
sbs cfd monster quest lol bar press global media wiki ninja rocks guru tools agency company center
city love ink support services solutions systems digital studio design art bond cam codes best
mom beauty hair skin makeup boats autos homes yachts motorcycles bio eco green
finance bank money cash credit loans insurance capital fund market markets trading
academy school college university education social chat games game casino bet poker porn sex
adult dating tube video movie film photo photos pics gallery pictures`

const countryTLDs = `ac ad ae af ag ai al am ao aq ar as at au aw ax az ba bb bd be bf bg bh bi bj bm bn bo
br bs bt bw by bz ca cc cd cf cg ch ci ck cl cm cn co cr cu cv cw cx cy cz de dj dk dm do dz ec ee
eg er es et eu fi fj fk fm fo fr ga gb gd ge gf gg gh gi gl gm gn gp gq gr gs gt gu gw gy hk hm hn
hr ht hu id ie il im in io iq ir is it je jm jo jp ke kg kh ki km kn kp kr kw ky kz la lb lc li lk
lr ls lt lu lv ly ma mc md me mg mh mk ml mm mn mo mp mq mr ms mt mu mv mw mx my mz na nc ne nf ng
ni nl no np nr nu nz om pa pe pf pg ph pk pl pm pn pr ps pt pw py qa re ro rs ru rw sa sb sc sd se
sg sh si sk sl sm sn so sr ss st su sv sx sy sz tc td tf tg th tj tk tl tm tn to tr tt tv tw tz ua
ug uk us uy uz va vc ve vg vi vn vu wf ws ye yt za zm zw`

const internalTLDs = `local internal corp lan localdomain intranet home`

const excludedTLDs = `sh py pl md so ps rs zip mov name id host email network group zone date`

// knownTLD says a dotted name's last label is a TLD of knownTLDs, written
// all in lower or all in upper case (a mixed-case last label is a field or
// a type name, as in google.compute.Instance).
func knownTLD(tld string) bool {
	if tld != strings.ToLower(tld) && tld != strings.ToUpper(tld) {
		return false
	}
	return knownTLDs[strings.ToLower(tld)]
}
