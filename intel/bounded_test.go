package intel

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The capped decoders split arrays and objects at the right places, with
// brackets, quotes and escapes inside strings, and keep at most their cap.
func TestBoundedDecoders(t *testing.T) {
	var l list[string, upTo10]
	require.NoError(t, json.Unmarshal([]byte(` [ "a\"],", {"x":"]}"} , "b" ,1, [[]],"c\\" ] `), &l))
	require.Equal(t, []string{`a"],`, "b", `c\`}, l.Items, "elements of another shape are counted, not kept")
	require.Equal(t, 6, l.Total)

	var many list[int, upTo10]
	require.NoError(t, json.Unmarshal([]byte(`[1,2,3,4,5,6,7,8,9,10,11,12]`), &many))
	require.Len(t, many.Items, 10)
	require.Equal(t, 12, many.Total)

	var d dict[num, upTo10]
	require.NoError(t, json.Unmarshal([]byte(`{"a\"}": 1, "b": {"c": [2]}, "c": "3", "d": null}`), &d))
	require.Equal(t, 4, d.Total)
	require.Equal(t, 1.0, d.Items[`a"}`].value())
	require.Nil(t, d.Items["b"].value(), "an object is no number")
	require.Equal(t, 3.0, d.Items["c"].value())

	var s struct {
		A scalar               `json:"a"`
		B scalar               `json:"b"`
		C present              `json:"c"`
		D present              `json:"d"`
		E list[string, upTo10] `json:"e"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"a": {"x": 1}, "b": 200, "c": [{}], "d": [], "e": {"x": "y"}}`), &s))
	require.Equal(t, scalar(""), s.A)
	require.Equal(t, scalar("200"), s.B)
	require.True(t, bool(s.C))
	require.False(t, bool(s.D))
	require.Zero(t, s.E.Total, "an object is no list")
}
