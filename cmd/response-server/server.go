package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/termtext"
)

// maxListed bounds list_blocked's answer: the newest entries of each list.
const maxListed = 200

type options struct {
	allowPrivate bool
}

// responder holds what the tools need.
type responder struct {
	inv   *inventory
	store *store
	opts  options
	log   *slog.Logger
}

type lookupHostIn struct {
	Host string `json:"host" jsonschema:"a hostname, short name, instance ID or IP address to look up in the inventory"`
}

type lookupHostOut struct {
	Query   string `json:"query" jsonschema:"the host asked for"`
	Found   bool   `json:"found" jsonschema:"whether the inventory knows the host"`
	Host    *Host  `json:"host,omitempty" jsonschema:"the inventory entry, when found"`
	Message string `json:"message" jsonschema:"one sentence saying what was found"`
}

type listBlockedIn struct{}

type listedIP struct {
	IP     string `json:"ip"`
	At     string `json:"at" jsonschema:"when it was blocked, RFC 3339 UTC"`
	Reason string `json:"reason"`
}

type listedUser struct {
	User   string `json:"user"`
	At     string `json:"at" jsonschema:"when it was disabled, RFC 3339 UTC"`
	Reason string `json:"reason"`
}

type listBlockedOut struct {
	BlockedIPs         []listedIP   `json:"blocked_ips" jsonschema:"blocked addresses, oldest first (at most the newest 200)"`
	BlockedIPsTotal    int          `json:"blocked_ips_total" jsonschema:"how many addresses are blocked in all"`
	DisabledUsers      []listedUser `json:"disabled_users" jsonschema:"disabled users, oldest first (at most the newest 200)"`
	DisabledUsersTotal int          `json:"disabled_users_total" jsonschema:"how many users are disabled in all"`
}

type blockIPIn struct {
	IP     string `json:"ip" jsonschema:"one public IPv4 or IPv6 address to block, without a prefix length"`
	Reason string `json:"reason" jsonschema:"why, in one line of at most 300 bytes"`
}

type blockIPOut struct {
	IP      string `json:"ip" jsonschema:"the address in canonical form"`
	Status  string `json:"status" jsonschema:"blocked, or already_blocked when an earlier call blocked it"`
	At      string `json:"at" jsonschema:"when it was blocked, RFC 3339 UTC"`
	Reason  string `json:"reason" jsonschema:"the reason recorded with the block"`
	Message string `json:"message" jsonschema:"one sentence saying what happened"`
}

type disableUserIn struct {
	User   string `json:"user" jsonschema:"the account name to disable: letters, digits, '.', '_', '@' or '-'"`
	Reason string `json:"reason" jsonschema:"why, in one line of at most 300 bytes"`
}

type disableUserOut struct {
	User    string `json:"user"`
	Status  string `json:"status" jsonschema:"disabled, or already_disabled when an earlier call disabled it"`
	At      string `json:"at" jsonschema:"when it was disabled, RFC 3339 UTC"`
	Reason  string `json:"reason" jsonschema:"the reason recorded with the change"`
	Message string `json:"message" jsonschema:"one sentence saying what happened"`
}

func ptr[T any](v T) *T { return &v }

func newServer(r *responder) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "response-server", Title: "Local response actions", Version: "1.0.0"}, &mcp.ServerOptions{
		Instructions: "Look up hosts in the local inventory and take response actions (block an IP, disable a user) that are written to local files.",
	})
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
	action := &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)}
	mcp.AddTool(s, &mcp.Tool{
		Name:        "lookup_host",
		Title:       "Look up a host",
		Description: "Find a host in the asset inventory by hostname, short name, instance ID or IP address: its addresses, owner, role, operating system and criticality.",
		Annotations: readOnly,
	}, r.lookupHost)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "list_blocked",
		Title:       "List blocked IPs and disabled users",
		Description: "List the IP addresses blocked and the users disabled so far, with when and why.",
		Annotations: readOnly,
	}, r.listBlocked)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "block_ip",
		Title:       "Block an IP address",
		Description: "Block one public IP address at the perimeter, recording the reason. Blocking an address that is already blocked changes nothing and says so.",
		Annotations: action,
	}, r.blockIP)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "disable_user",
		Title:       "Disable a user account",
		Description: "Disable one user account, recording the reason. Disabling an account that is already disabled changes nothing and says so.",
		Annotations: action,
	}, r.disableUser)
	s.AddReceivingMiddleware(boundSchemaErrors)
	return s
}

// maxSchemaDetail bounds the part of a schema-validation error that is
// passed back; the SDK's message can quote the hostile arguments.
const maxSchemaDetail = 160

// boundSchemaErrors rewrites the SDK's input-validation errors into one
// bounded line without control characters, as the handlers' own errors
// are: the SDK quotes the offending value or property names in full.
func boundSchemaErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		ctr, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || !ctr.IsError || len(ctr.Content) != 1 {
			return res, err
		}
		text, ok := ctr.Content[0].(*mcp.TextContent)
		if !ok {
			return res, err
		}
		detail, found := strings.CutPrefix(text.Text, `validating "arguments": `)
		if !found {
			return res, err
		}
		detail = strings.TrimPrefix(detail, "validating root: ")
		text.Text = "The arguments do not match the tool's input schema: " + clip.String(termtext.Line(detail), maxSchemaDetail) + "."
		return res, err
	}
}

func (r *responder) lookupHost(_ context.Context, _ *mcp.CallToolRequest, in lookupHostIn) (*mcp.CallToolResult, lookupHostOut, error) {
	q := strings.TrimSpace(in.Host)
	h, err := r.inv.lookup(q)
	if err != nil {
		return nil, lookupHostOut{}, err
	}
	// q is a valid name or address here, so echoing it is safe.
	out := lookupHostOut{Query: q, Found: h != nil, Host: h}
	if h == nil {
		out.Message = fmt.Sprintf("No host in the inventory matches %s.", q)
	} else {
		out.Message = fmt.Sprintf("%s is in the inventory (owner %s, criticality %s).", h.Hostname, orNone(h.Owner), orNone(h.Criticality))
	}
	return nil, out, nil
}

func orNone(s string) string {
	if s == "" {
		return "not recorded"
	}
	return s
}

func (r *responder) listBlocked(context.Context, *mcp.CallToolRequest, listBlockedIn) (*mcp.CallToolResult, listBlockedOut, error) {
	ips, err := r.store.list(blockedFile)
	if err != nil {
		return nil, listBlockedOut{}, err
	}
	users, err := r.store.list(disabledFile)
	if err != nil {
		return nil, listBlockedOut{}, err
	}
	out := listBlockedOut{
		BlockedIPs: []listedIP{}, BlockedIPsTotal: len(ips),
		DisabledUsers: []listedUser{}, DisabledUsersTotal: len(users),
	}
	for _, e := range newest(ips) {
		e = bounded(e)
		out.BlockedIPs = append(out.BlockedIPs, listedIP{IP: e.Subject, At: e.At, Reason: e.Reason})
	}
	for _, e := range newest(users) {
		e = bounded(e)
		out.DisabledUsers = append(out.DisabledUsers, listedUser{User: e.Subject, At: e.At, Reason: e.Reason})
	}
	return nil, out, nil
}

// bounded caps a listed entry: the files can be edited by hand, so a line
// is not known to be one this server wrote.
func bounded(e entry) entry {
	return entry{
		Subject: clip.String(termtext.Line(e.Subject), 128),
		At:      clip.String(termtext.Line(e.At), 64),
		Reason:  clip.String(termtext.Line(e.Reason), maxReasonBytes),
	}
}

func newest(es []entry) []entry {
	if len(es) > maxListed {
		return es[len(es)-maxListed:]
	}
	return es
}

func (r *responder) blockIP(_ context.Context, _ *mcp.CallToolRequest, in blockIPIn) (*mcp.CallToolResult, blockIPOut, error) {
	addr, err := parseBlockIP(in.IP, r.opts.allowPrivate, r.inv)
	if err != nil {
		return nil, blockIPOut{}, err
	}
	reason, err := checkReason(in.Reason)
	if err != nil {
		return nil, blockIPOut{}, err
	}
	e, added, err := r.store.add(blockedFile, addr.String(), reason)
	if err != nil {
		return nil, blockIPOut{}, fmt.Errorf("could not block %s: %w", addr, err)
	}
	out := blockIPOut{IP: e.Subject, At: e.At, Reason: e.Reason}
	if added {
		out.Status = "blocked"
		out.Message = fmt.Sprintf("%s is now blocked.", e.Subject)
		r.log.Info("blocked IP", "ip", e.Subject, "reason", e.Reason)
	} else {
		out.Status = "already_blocked"
		out.Message = fmt.Sprintf("%s was already blocked at %s; nothing changed.", e.Subject, e.At)
	}
	return nil, out, nil
}

func (r *responder) disableUser(_ context.Context, _ *mcp.CallToolRequest, in disableUserIn) (*mcp.CallToolResult, disableUserOut, error) {
	user, err := checkUser(in.User)
	if err != nil {
		return nil, disableUserOut{}, err
	}
	reason, err := checkReason(in.Reason)
	if err != nil {
		return nil, disableUserOut{}, err
	}
	e, added, err := r.store.add(disabledFile, user, reason)
	if err != nil {
		return nil, disableUserOut{}, fmt.Errorf("could not disable %s: %w", user, err)
	}
	out := disableUserOut{User: e.Subject, At: e.At, Reason: e.Reason}
	if added {
		out.Status = "disabled"
		out.Message = fmt.Sprintf("User %s is now disabled.", e.Subject)
		r.log.Info("disabled user", "user", e.Subject, "reason", e.Reason)
	} else {
		out.Status = "already_disabled"
		out.Message = fmt.Sprintf("User %s was already disabled at %s; nothing changed.", e.Subject, e.At)
	}
	return nil, out, nil
}
