(ns kafka-chaos.elle-cycles
  "Elle's cycle search over a dependency graph that kafka-chaos inferred.

  Loaded into the in-process JVM by checkers/elle.py (clojure.core/load-file)
  and called as (check edn-text). Python infers the ww and wr edges (at scale,
  in Spark); Elle adds process and realtime order and finds and names the
  cycles (G0, G1c and their -process and -realtime variants), as Jepsen's
  Kafka checker (jepsen.tests.kafka/cycles!) does with edges it infers itself.

  Input, EDN text: {:ops [op ...] :edges [edge ...] :search-timeout-ms n}
    op:   {:index i :invoke_index j :time ns :invoke_time ns :process p
           :type \"ok\"|\"info\" :value v?}  (index/time: the completion)
    edge: {:from i :to j :kind \"ww\"|\"wr\" :data {...}}
  Output: a map of anomaly name (string) -> vector of cycles, each
    {\"indices\" [i ...] \"steps\" [{\"from\" i \"to\" j \"kind\" k
     \"data\" {...} \"text\" s} ...] \"text\" s},
  built from Clojure maps, vectors, strings and longs (java.util.Map, List),
  which checkers/elle.py turns into Python data."
  (:require [bifurcan-clj.core :as b]
            [clojure.edn :as edn]
            [elle.core :as elle]
            [elle.graph :as g]
            [elle.rels :as rels]
            [elle.txn :as txn]
            [jepsen.history :as h])
  (:import (ch.qos.logback.classic Level Logger LoggerContext)
           (ch.qos.logback.classic.encoder PatternLayoutEncoder)
           (ch.qos.logback.core ConsoleAppender)
           (org.slf4j LoggerFactory)))

(defn- log-warnings-to-stderr!
  "elle.txn points logback at stdout, at info, when it loads; stdout may carry
  kafka-chaos's JSON output, so keep only warnings, on stderr."
  []
  (let [^LoggerContext ctx (LoggerFactory/getILoggerFactory)
        ^Logger root       (.getLogger ctx Logger/ROOT_LOGGER_NAME)
        encoder            (doto (PatternLayoutEncoder.)
                             (.setContext ctx)
                             (.setPattern "elle %p %c: %m%n")
                             (.start))
        appender           (doto (ConsoleAppender.)
                             (.setContext ctx)
                             (.setTarget "System.err")
                             (.setEncoder encoder)
                             (.start))]
    (.detachAndStopAllAppenders root)
    (.addAppender root appender)
    (.setLevel root Level/WARN)))

(log-warnings-to-stderr!)

;; History: invocation and completion pairs, so Elle's process and realtime
;; orders apply. Indices are the caller's (a sparse jepsen.history), so Elle's
;; realtime explanations name the kafka-chaos history's own lines.

(defn- ->history
  [ops]
  (->> ops
       (mapcat (fn [{:keys [index invoke_index time invoke_time process type value]}]
                 [{:index invoke_index, :time invoke_time, :type :invoke,
                   :process process, :f :txn, :value value}
                  {:index index, :time time, :type (keyword type),
                   :process process, :f :txn, :value value}]))
       (sort-by :index)
       vec
       (#(h/history % {:have-indices? true}))))

;; Edges and their explanations

(def ^:private kind->rel {"ww" rels/ww, "wr" rels/wr})

(defn- edge-index
  "[from to] -> the edges between them, ww first: a pair with both is explained
  as ww, as Jepsen's combined ww-then-wr explainer does."
  [edges]
  (->> edges
       (sort-by (fn [{:keys [kind]}] (if (= "ww" kind) 0 1)))
       (reduce (fn [m {:keys [from to] :as e}] (update m [from to] (fnil conj []) e))
               {})))

(defn- at
  "\" to t/3\" (or from) and \" at offset 17\", leaving out what is unknown."
  [prep {:keys [topic partition]} offset]
  (str (cond (and topic (some? partition)) (str " " prep " " topic "/" partition)
             topic                         (str " " prep " " topic))
       (when (some? offset) (str " at offset " offset))))

(defn render
  "Why the edge a -> b exists, in words."
  [{:keys [type data]} a-name b-name]
  (let [{:keys [value offset next_value next_offset]} data]
    (case type
      :ww (str a-name " sent " value (at "to" data offset)
               ", directly before " b-name "'s "
               (if (some? next_value) next_value "next value")
               (when (some? next_offset) (str " at offset " next_offset)))
      :wr (str b-name " polled " value (at "from" data offset)
               ", which " a-name " sent"))))

(defrecord KafkaExplainer [edges-by-pair]
  elle/DataExplainer
  (explain-pair-data [_ a b]
    (when-let [{:keys [kind data]} (first (get edges-by-pair [(:index a) (:index b)]))]
      {:type (keyword kind), :data data}))

  (render-explanation [_ explanation a-name b-name]
    (render explanation a-name b-name)))

(defn- kafka-analyzer
  "An Elle analyzer: the caller's ww and wr edges as an op graph."
  [edges]
  (fn analyze [history]
    (let [by-index (into {} (comp (remove h/invoke?) (map (juxt :index identity))) history)
          graph    (reduce (fn [graph {:keys [from to kind]}]
                             (g/link graph (by-index from) (by-index to) (kind->rel kind)))
                           (b/linear (g/op-digraph))
                           edges)]
      {:graph     (b/forked graph)
       :explainer (->KafkaExplainer (edge-index edges))})))

;; Back to Python: strings, longs, vectors and maps only.

(defn- step->data
  "A cycle step's explanation as plain data: the caller's own edge data for ww
  and wr, the process or the two indices for Elle's own orders."
  [step]
  (case (:type step)
    (:ww :wr)  (:data step)
    :process   {:process (:process step)}
    :realtime  {:completed_index (:index (:a' step)), :invoke_index (:index (:b step))}
    {}))

(defn- plain
  "Keywords to strings, sets to sorted vectors, recursively."
  [x]
  (cond (keyword? x) (name x)
        (map? x)     (into {} (map (fn [[k v]] [(plain k) (plain v)])) x)
        (set? x)     (mapv plain (sort x))
        (coll? x)    (mapv plain x)
        :else        x))

(defn- cycle->data
  [pair-explainer {:keys [cycle steps] :as explained}]
  (let [names (mapv #(str "T" (inc %)) (range (dec (count cycle))))]
    {"indices" (mapv :index (butlast cycle))
     "steps"   (vec (map-indexed
                      (fn [i step]
                        {"from" (:index (nth cycle i))
                         "to"   (:index (nth cycle (inc i)))
                         "kind" (name (:type step))
                         "data" (plain (step->data step))
                         "text" (elle/render-explanation
                                  pair-explainer step
                                  (nth names i) (nth names (mod (inc i) (count names))))})
                      steps))
     "text"    (elle/render-cycle-explanation txn/cycle-explainer pair-explainer explained)}))

(defn check
  "Runs Elle's cycle search (elle.txn/cycles!, strict-serializable, as Jepsen's
  Kafka checker) over the graph in edn-text; see the namespace doc."
  [edn-text]
  (let [{:keys [ops edges search-timeout-ms]} (edn/read-string edn-text)
        history  (->history ops)
        opts     (cond-> {:consistency-models [:strict-serializable]
                          :anomalies          [:G0 :G1c]}
                   search-timeout-ms (assoc :cycle-search-timeout search-timeout-ms))
        ; Explainers in this order: a pair with a data edge is explained by
        ; it, and a process edge wins over the realtime edge it implies.
        analyzer (elle/combine (kafka-analyzer edges) elle/process-graph elle/realtime-graph)
        ; No :directory: nothing is written, and no plots (graphviz) are drawn.
        {:keys [anomalies explainer]} (txn/cycles! opts analyzer history)]
    (->> (txn/remove-redundant-cycle-exists anomalies)
         (into {} (map (fn [[type cases]]
                         [(name type)
                          (if (txn/cycle-types type)
                            (mapv (partial cycle->data explainer) cases)
                            (plain cases))]))))))

(defn check-json
  "check, answered as one JSON string: handing Python a single string costs one
  JNI crossing, where walking the answer's collections from Python cost one per
  element (12k cycles at 1e6 ops: seconds). Jackson comes with unilog."
  [edn-text]
  (.writeValueAsString (com.fasterxml.jackson.databind.ObjectMapper.) (check edn-text)))

