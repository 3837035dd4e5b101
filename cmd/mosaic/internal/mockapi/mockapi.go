// Package mockapi is a stand-in for the model APIs the agents speak (the
// Anthropic Messages API, the OpenAI Responses and Chat Completions APIs),
// served over HTTPS with a CA of its own, so that the real agent CLIs can be
// tested end to end without reaching a vendor.
//
// It plays a fixed script. A request whose conversation already holds a tool
// result is answered "MOCK-DONE". A request that offers a shell tool and whose
// prompt holds MOCKRUN[command] gets one call of that tool running command.
// Anything else is answered "MOCK-ANSWER". Every request is recorded (method,
// path, the headers that carry keys, the protocol) for the tests to check.
package mockapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Request is what the mock saw of one request.
type Request struct {
	Method, Path, Proto, Host string
	// Key is the credential the request carried and the header it came in
	// ("x-api-key", "authorization"), empty if none.
	Key, KeyHeader string
	UserAgent      string
	Tools          []string // the names of the tools the request offered
	Encoding       string   // Content-Encoding of the body, if any
	// Reply is what the mock did: "answer", "tool:NAME", "done", or "404".
	Reply string
}

// Server is a running mock.
type Server struct {
	// CAPEM is the certificate of the CA that signed the server's
	// certificate, for the agents' CA variables.
	CAPEM []byte
	URL   string // https://HOST:PORT
	srv   *http.Server
	mu    sync.Mutex
	log   []Request
}

// Start serves the mock on l over TLS with a certificate for names (DNS names
// or IP addresses), signed by a fresh CA.
func Start(l net.Listener, names ...string) (*Server, error) {
	caPEM, cert, err := newCert(names)
	if err != nil {
		return nil, err
	}
	s := &Server{CAPEM: caPEM, URL: "https://" + l.Addr().String()}
	if len(names) > 0 {
		_, port, _ := net.SplitHostPort(l.Addr().String())
		s.URL = "https://" + net.JoinHostPort(names[0], port)
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}},
	}
	go s.srv.ServeTLS(l, "", "")
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Requests returns what the mock has seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

var (
	runPattern = regexp.MustCompile(`MOCKRUN\[([^\]"\\]*)\]`)
	// A tool's result in each API's conversation.
	toolResultPattern = regexp.MustCompile(`"type":\s*"(tool_result|function_call_output)"|"role":\s*"tool"`)
	shellTools        = []string{"Bash", "bash", "exec_command", "shell_command", "shell"}
)

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	rec := Request{Method: r.Method, Path: r.URL.Path, Proto: r.Proto, Host: r.Host, UserAgent: r.UserAgent(), Encoding: r.Header.Get("Content-Encoding")}
	if k := r.Header.Get("x-api-key"); k != "" {
		rec.Key, rec.KeyHeader = k, "x-api-key"
	} else if k := r.Header.Get("Authorization"); k != "" {
		rec.Key, rec.KeyHeader = strings.TrimPrefix(k, "Bearer "), "authorization"
	}
	defer func() {
		s.mu.Lock()
		s.log = append(s.log, rec)
		s.mu.Unlock()
	}()
	var req struct {
		Model  string            `json:"model"`
		Stream bool              `json:"stream"`
		Tools  []json.RawMessage `json:"tools"`
	}
	_ = json.Unmarshal(body, &req)
	rec.Tools = toolNames(req.Tools)
	if req.Model == "" {
		req.Model = "mock-model"
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	kind := ""
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/messages/count_tokens"):
		rec.Reply = "count"
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":10}`)
		return
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/messages"):
		kind = "anthropic"
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/responses"):
		kind = "responses"
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/chat/completions"):
		kind = "chat"
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/models"):
		rec.Reply = "models"
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"mock-model","object":"model","created":0,"owned_by":"mock","type":"model","display_name":"Mock"}],"models":[]}`)
		return
	default:
		rec.Reply = "404"
		http.NotFound(w, r)
		return
	}
	rep := reply{text: "MOCK-ANSWER"}
	rec.Reply = "answer"
	if toolResultPattern.Match(body) {
		rep.text, rec.Reply = "MOCK-DONE", "done"
	} else if m := runPattern.FindSubmatch(body); m != nil {
		if name, args := shellCall(req.Tools, string(m[1])); name != "" {
			rep = reply{tool: name, args: args}
			rec.Reply = "tool:" + name
		}
	}
	switch kind {
	case "anthropic":
		anthropic(w, req.Model, req.Stream, rep)
	case "responses":
		responses(w, req.Model, req.Stream, rep)
	case "chat":
		chat(w, req.Model, req.Stream, rep)
	}
}

type reply struct {
	text       string
	tool, args string // a tool call: its name and JSON arguments
}

// shellCall picks a shell tool the request offers and the arguments that run
// command with it, shaped by the tool's own schema (a string or an argv).
func shellCall(tools []json.RawMessage, command string) (string, string) {
	type schema struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	offered := map[string]schema{}
	for _, raw := range tools {
		var t struct {
			Name        string  `json:"name"`
			InputSchema *schema `json:"input_schema"`
			Parameters  *schema `json:"parameters"`
			Function    *struct {
				Name       string  `json:"name"`
				Parameters *schema `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		sc := t.InputSchema
		if sc == nil {
			sc = t.Parameters
		}
		if t.Function != nil {
			t.Name, sc = t.Function.Name, t.Function.Parameters
		}
		if sc == nil {
			sc = &schema{}
		}
		offered[t.Name] = *sc
	}
	for _, name := range shellTools {
		sc, ok := offered[name]
		if !ok {
			continue
		}
		args := map[string]any{}
		for _, key := range []string{"command", "cmd"} {
			p, ok := sc.Properties[key]
			if !ok {
				continue
			}
			if p.Type == "array" {
				args[key] = []string{"bash", "-lc", command}
			} else {
				args[key] = command
			}
			break
		}
		if _, ok := sc.Properties["description"]; ok {
			args["description"] = "run the mock's command"
		}
		b, _ := json.Marshal(args)
		return name, string(b)
	}
	return "", ""
}

// sse writes one server-sent event.
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

type obj = map[string]any

func anthropic(w http.ResponseWriter, model string, stream bool, r reply) {
	usage := obj{"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	block, stop := obj{"type": "text", "text": r.text}, "end_turn"
	if r.tool != "" {
		var input any
		_ = json.Unmarshal([]byte(r.args), &input)
		block, stop = obj{"type": "tool_use", "id": "toolu_mock1", "name": r.tool, "input": input}, "tool_use"
	}
	msg := obj{"id": "msg_mock", "type": "message", "role": "assistant", "model": model, "content": []any{block},
		"stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	start := obj{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	sse(w, "message_start", obj{"type": "message_start", "message": start})
	if r.tool != "" {
		sse(w, "content_block_start", obj{"type": "content_block_start", "index": 0,
			"content_block": obj{"type": "tool_use", "id": "toolu_mock1", "name": r.tool, "input": obj{}}})
		sse(w, "content_block_delta", obj{"type": "content_block_delta", "index": 0,
			"delta": obj{"type": "input_json_delta", "partial_json": r.args}})
	} else {
		sse(w, "content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "text", "text": ""}})
		sse(w, "content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "text_delta", "text": r.text}})
	}
	sse(w, "content_block_stop", obj{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": stop, "stop_sequence": nil}, "usage": obj{"output_tokens": 5}})
	sse(w, "message_stop", obj{"type": "message_stop"})
}

func responses(w http.ResponseWriter, model string, stream bool, r reply) {
	item := obj{"type": "message", "id": "msg_mock", "status": "completed", "role": "assistant",
		"content": []any{obj{"type": "output_text", "text": r.text, "annotations": []any{}}}}
	if r.tool != "" {
		item = obj{"type": "function_call", "id": "fc_mock", "call_id": "call_mock1", "name": r.tool, "arguments": r.args, "status": "completed"}
	}
	usage := obj{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
		"input_tokens_details": obj{"cached_tokens": 0}, "output_tokens_details": obj{"reasoning_tokens": 0}}
	resp := obj{"id": "resp_mock", "object": "response", "created_at": time.Now().Unix(), "status": "completed",
		"model": model, "output": []any{item}, "usage": usage}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	inProgress := obj{"id": "resp_mock", "object": "response", "created_at": resp["created_at"], "status": "in_progress", "model": model, "output": []any{}}
	seq := 0
	ev := func(typ string, data obj) {
		data["type"], data["sequence_number"] = typ, seq
		seq++
		sse(w, typ, data)
	}
	ev("response.created", obj{"response": inProgress})
	ev("response.output_item.added", obj{"output_index": 0, "item": item})
	if r.tool == "" {
		ev("response.output_text.delta", obj{"item_id": "msg_mock", "output_index": 0, "content_index": 0, "delta": r.text})
	}
	ev("response.output_item.done", obj{"output_index": 0, "item": item})
	ev("response.completed", obj{"response": resp})
}

func chat(w http.ResponseWriter, model string, stream bool, r reply) {
	msg := obj{"role": "assistant", "content": r.text}
	finish := "stop"
	if r.tool != "" {
		msg = obj{"role": "assistant", "content": nil, "tool_calls": []any{obj{"index": 0, "id": "call_mock1", "type": "function",
			"function": obj{"name": r.tool, "arguments": r.args}}}}
		finish = "tool_calls"
	}
	usage := obj{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(obj{"id": "chatcmpl-mock", "object": "chat.completion", "created": time.Now().Unix(), "model": model,
			"choices": []any{obj{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta obj, finish any, usage any) {
		sse(w, "", obj{"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": model,
			"choices": []any{obj{"index": 0, "delta": delta, "finish_reason": finish}}, "usage": usage})
	}
	chunk(msg, nil, nil)
	chunk(obj{}, finish, usage)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// newCert makes a CA and a server certificate it signs for names.
func newCert(names []string) ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mosaic mock API CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, _ = x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "mock API"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}, nil
}

// toolNames lists the names of the tools offered, in any API's shape.
func toolNames(tools []json.RawMessage) []string {
	var names []string
	for _, raw := range tools {
		var t struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		switch {
		case t.Function != nil:
			names = append(names, t.Function.Name)
		case t.Name != "":
			names = append(names, t.Name)
		default:
			names = append(names, t.Type)
		}
	}
	return names
}
