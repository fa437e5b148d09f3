package geminitest

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/genai"
)

func (r *Request) parseBody() error {
	if len(bytes.TrimSpace(r.Body)) == 0 {
		return fmt.Errorf("empty body")
	}
	switch r.Method {
	case MethodGenerateContent, MethodStreamGenerateContent:
		return r.parseGenerate()
	default:
		return r.parseEmbed()
	}
}

func (r *Request) parseGenerate() error {
	var raw struct {
		Contents          json.RawMessage `json:"contents"`
		SystemInstruction json.RawMessage `json:"systemInstruction"`
		Tools             json.RawMessage `json:"tools"`
		ToolConfig        json.RawMessage `json:"toolConfig"`
		GenerationConfig  json.RawMessage `json:"generationConfig"`
	}
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	fields := []struct {
		name string
		raw  json.RawMessage
		dst  any
	}{
		{"contents", raw.Contents, &r.Contents},
		{"systemInstruction", raw.SystemInstruction, &r.SystemInstruction},
		{"tools", raw.Tools, &r.Tools},
		{"toolConfig", raw.ToolConfig, &r.ToolConfig},
	}
	for _, f := range fields {
		if len(f.raw) == 0 {
			continue
		}
		if err := json.Unmarshal(f.raw, f.dst); err != nil {
			return fmt.Errorf("field %s: %w", f.name, err)
		}
	}
	if len(r.Contents) == 0 {
		return fmt.Errorf("contents is required")
	}
	if len(raw.GenerationConfig) > 0 {
		r.GenerationConfig = raw.GenerationConfig
		var gc struct {
			ResponseMIMEType   string         `json:"responseMimeType"`
			ResponseSchema     map[string]any `json:"responseSchema"`
			ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
		}
		if err := json.Unmarshal(raw.GenerationConfig, &gc); err != nil {
			return fmt.Errorf("field generationConfig: %w", err)
		}
		r.ResponseMIMEType = gc.ResponseMIMEType
		switch {
		case gc.ResponseSchema != nil:
			r.ResponseSchema, r.SchemaField = gc.ResponseSchema, "responseSchema"
		case gc.ResponseJSONSchema != nil:
			r.ResponseSchema, r.SchemaField = gc.ResponseJSONSchema, "responseJsonSchema"
		}
	}
	return nil
}

func (r *Request) parseEmbed() error {
	var raw struct {
		Requests []struct {
			Content *genai.Content `json:"content"`
		} `json:"requests"`
		Content   *genai.Content `json:"content"`
		Instances []struct {
			Content json.RawMessage `json:"content"`
		} `json:"instances"`
	}
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		return fmt.Errorf("not an embedding request: %w", err)
	}
	switch r.Method {
	case MethodBatchEmbedContents:
		for _, q := range raw.Requests {
			r.EmbedTexts = append(r.EmbedTexts, ContentText(q.Content))
		}
	case MethodEmbedContent:
		if raw.Content == nil {
			return fmt.Errorf("content is required")
		}
		r.EmbedTexts = append(r.EmbedTexts, ContentText(raw.Content))
	case MethodPredict:
		for _, in := range raw.Instances {
			var s string
			if json.Unmarshal(in.Content, &s) == nil {
				r.EmbedTexts = append(r.EmbedTexts, s)
				continue
			}
			var c genai.Content
			if err := json.Unmarshal(in.Content, &c); err != nil {
				return fmt.Errorf("instances[].content: %w", err)
			}
			r.EmbedTexts = append(r.EmbedTexts, ContentText(&c))
		}
	}
	if len(r.EmbedTexts) == 0 {
		return fmt.Errorf("nothing to embed")
	}
	return nil
}
